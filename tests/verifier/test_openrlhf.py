"""The OpenRLHF remote-reward route, driven with the request OpenRLHF's client sends.

OpenRLHF's `remote_rm_fn` posts `{"query", "prompts", "labels"}` (query = prompt + response) to the
URL given as `--remote_rm_url` and reads `rewards` back (newer versions also `scores`, `extra_logs`).
Real HTTP on loopback; one request mixes math and code samples. Code verdicts come from the ``fake``
sandbox backend (a table: this tests the route, not the sandbox, so it needs neither root nor Docker).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from mucode.verifier.local import local_verifier

ADD = json.dumps({"tests": {"format": "stdio", "inputs": ["1 2\n"], "outputs": ["3\n"]}})
GOOD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    rules = [
        {"contains": "print(a + b)", "verdict": "correct"},
        {"contains": "while True", "verdict": "sandbox_error"},
    ]  # the sandbox failing on this one
    with local_verifier(
        "fake",
        programs=["math", "code", "exact_match"],
        math_workers=1,
        backend_options={"rules": rules, "default": "wrong_answer"},
    ) as base:
        yield base


def test_mixed_request_in_openrlhfs_shape(url: str) -> None:
    prompts = [
        "<|user|>What is 1/2?<|assistant|>",
        "<|user|>Add.<|assistant|>",
        "<|user|>Add.<|assistant|>",
        "<|user|>Say hi<|assistant|>",
    ]
    responses = ["It is \\boxed{0.5}", GOOD, "```python\nprint(0)\n```", "Answer: hi"]
    labels = ["\\frac{1}{2}", ADD, ADD, json.dumps({"program": "exact_match", "spec": {"answer": "hi"}})]
    body = {
        "query": [p + r for p, r in zip(prompts, responses, strict=True)],
        "prompts": prompts,
        "labels": labels,
        "metas": [{}] * 4,
    }  # newer OpenRLHF clients send metas; ignored
    r = httpx.post(f"{url}/openrlhf/reward", json=body, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["rewards"] == [1.0, 1.0, 0.0, 1.0] and out["scores"] == out["rewards"]
    assert out["extra_logs"]["correct"] == [1.0, 1.0, 0.0, 1.0]


def test_the_prompt_is_stripped_before_scoring(url: str) -> None:
    """A \\boxed{} in the prompt must not count: only the response after it is the answer."""
    prompt = "Example: \\boxed{7}. What is 3 + 4?"
    r = httpx.post(
        f"{url}/openrlhf/reward",
        json={"query": [prompt + " I don't know."], "prompts": [prompt], "labels": ["7"]},
        timeout=60,
    )
    assert r.status_code == 200 and r.json()["rewards"] == [0.0]


def test_mismatched_lengths_are_a_422_with_the_fix(url: str) -> None:
    r = httpx.post(f"{url}/openrlhf/reward", json={"query": ["a", "b"], "labels": ["1"]}, timeout=60)
    assert r.status_code == 422 and "one label" in r.text


def test_an_infrastructure_failure_is_a_503_not_a_zero(url: str) -> None:
    """A code item with an infrastructure status (here the sandbox's) is not a 0: the route refuses to score it."""
    spin = "```python\nwhile True:\n    pass\n```"
    slow = json.dumps({"tests": {"format": "stdio", "inputs": ["\n"], "outputs": ["\n"]}, "time_limit_s": 5})
    r = httpx.post(
        f"{url}/openrlhf/reward",
        json={"query": [spin], "prompts": [""], "labels": [slow]},
        headers={"X-Mucode-Timeout-S": "3"},
        timeout=60,
    )
    assert r.status_code == 503 and "could not be scored" in r.text
