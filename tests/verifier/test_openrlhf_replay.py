"""OpenRLHF's remote reward client, replayed as it really sends: one sample per request, the query
decoded from token ids with ``skip_special_tokens=False`` (so the EOS text follows the closing fence),
labels straight from the data set's column (JSON text, a dict, a number).

The client code is OpenRLHF's (``openrlhf/utils/agent.py``, ``SingleTurnAgentExecutor``):
``hf_tokenizer(text=prompt, add_special_tokens=False)``, generation ids + EOS, ``hf_tokenizer.decode(
observation_tokens, skip_special_tokens=False)``, then ``aiohttp`` ``session.post(url, json={"query":
[query], "prompts": [prompt], "labels": [label]})``, ``raise_for_status()``, ``.json()``; it reads
``rewards``, ``scores`` and ``extra_logs``. The tokenizer is mucode's tiny one (Qwen's chat tokens);
code runs in the real ``local`` sandbox (root).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from transformers import AutoTokenizer

from mucode.assets import tiny_policy_path
from mucode.protocol import Status
from mucode.verifier.local import local_verifier

ADD_TESTS = {"tests": {"format": "stdio", "inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]}}
GOOD = "Here it is:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```"
WRONG = "```python\nprint(0)\n```"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the local sandbox backend needs root (CI runs as root)"
)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with local_verifier(
        "local", programs=["math", "code"], math_workers=1, backend_options={"slots": 2, "uid_base": 64100}
    ) as base:
        yield f"{base}/openrlhf/reward"


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return AutoTokenizer.from_pretrained(tiny_policy_path())


def _openrlhf_query(tokenizer: Any, prompt: str, response: str) -> str:
    prompt_token_ids = tokenizer(text=prompt, add_special_tokens=False, return_tensors="pt")["input_ids"][
        0
    ].tolist()
    action_token_ids = tokenizer(text=response, add_special_tokens=False)["input_ids"] + [
        tokenizer.eos_token_id
    ]
    return str(tokenizer.decode(prompt_token_ids + action_token_ids, skip_special_tokens=False))


async def _post(url: str, query: str, prompt: str, label: Any) -> dict[str, Any]:
    payload = {"query": [query], "prompts": [prompt], "labels": [label]}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=180)) as session:  # noqa: SIM117 - OpenRLHF's code
        async with session.post(url, json=payload) as response:
            response.raise_for_status()
            out: dict[str, Any] = await response.json()
            return out


def _reward(url: str, tokenizer: Any, response: str, label: Any) -> dict[str, Any]:
    prompt = str(
        tokenizer.apply_chat_template(
            [{"role": "user", "content": "Add two numbers."}], tokenize=False, add_generation_prompt=True
        )
    )
    query = _openrlhf_query(tokenizer, prompt, response)
    assert query.endswith("```<|im_end|>") or query.endswith("}<|im_end|>"), (
        query
    )  # what OpenRLHF really posts
    return asyncio.run(_post(url, query, prompt, label))


@pytest.mark.parametrize("label", [json.dumps(ADD_TESTS), ADD_TESTS], ids=["json-text", "dict"])
def test_correct_code_with_eos_after_the_fence_scores_1(url: str, tokenizer: Any, label: Any) -> None:
    out = _reward(url, tokenizer, GOOD, label)
    assert out["rewards"] == [1.0] and out["scores"] == [1.0]
    assert out["extra_logs"]["correct"] == [1.0] and out["extra_logs"]["status/correct"] == [1.0]
    assert _reward(url, tokenizer, WRONG, label)["rewards"] == [0.0]


@pytest.mark.parametrize("label", [12, 12.0, "12", [12]], ids=["int", "float", "text", "list-of-one"])
def test_a_number_label_is_a_math_answer(url: str, tokenizer: Any, label: Any) -> None:
    assert _reward(url, tokenizer, "5 + 7 = \\boxed{12}", label)["rewards"] == [1.0]
    assert _reward(url, tokenizer, "5 + 7 = \\boxed{13}", label)["rewards"] == [0.0]


def test_extra_logs_carry_every_status_with_the_same_keys(url: str, tokenizer: Any) -> None:
    """OpenRLHF concatenates extra_logs over samples: every answer has one flag per status."""
    wrong = _reward(url, tokenizer, WRONG, ADD_TESTS)["extra_logs"]
    crash = _reward(url, tokenizer, "```python\nraise SystemExit(3)\n```", ADD_TESTS)["extra_logs"]
    keys = {"correct"} | {f"status/{s.value}" for s in Status}
    assert set(wrong) == set(crash) == keys
    assert (
        wrong["status/wrong_answer"] == [1.0] and sum(v[0] for k, v in wrong.items() if k != "correct") == 1.0
    )
    assert crash["status/runtime_error"] == [1.0] and crash["status/wrong_answer"] == [0.0]


def test_an_unusable_label_is_a_422_naming_the_sample(url: str) -> None:
    async def post() -> tuple[int, str]:
        payload = {"query": ["x"], "prompts": [""], "labels": [[1, 2]]}
        async with aiohttp.ClientSession() as session, session.post(url, json=payload) as r:
            return r.status, await r.text()

    status, text = asyncio.run(post())
    assert status == 422 and "items[0].spec.answer" in text, text
