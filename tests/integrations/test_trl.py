"""The TRL adapter, called with TRL's reward-function signature against a real loopback verifier.

TRL's ``GRPOTrainer`` calls ``reward_func(prompts=..., completions=..., completion_ids=...,
trainer_state=..., **columns)`` with each other data-set column as a list (one value per completion).
One batch here mixes math rows (TRL's ``solution`` column) and code rows (a ``tests`` column),
in TRL's standard and conversational completion formats. Code verdicts come from the ``fake``
sandbox backend (programs containing ``a + b`` are correct, the rest wrong): this tests the adapter,
not the sandbox (tests/sandbox does that), so it needs neither root nor Docker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from mucode.integrations.trl import VerifierReward, VerifierUnavailableError
from mucode.verifier.local import local_verifier

ADD = {"tests": {"format": "stdio", "inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]}}
GOOD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
BAD = "```python\na, b = map(int, input().split())\nprint(a - b)\n```"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with local_verifier(
        "fake",
        programs=["math", "code"],
        math_workers=1,
        math_timeout_s=5.0,
        backend_options={"rules": [{"contains": "a + b", "verdict": "correct"}], "default": "wrong_answer"},
    ) as base:
        yield base


def test_mixed_math_and_code_batch_in_trl_call_shape(url: str) -> None:
    reward = VerifierReward(url)
    prompts = ["What is 1/2?", "What is 2+2?", "Add two numbers.", "Add two numbers."]
    completions = [
        "It is \\boxed{0.5}",
        [{"role": "assistant", "content": "So \\boxed{5}"}],  # conversational format
        [{"role": "assistant", "content": GOOD}],
        BAD,
    ]
    columns = {
        "solution": ["\\frac{1}{2}", "4", None, None],
        "tests": [None, None, ADD, json.dumps(ADD)],
    }  # a dict or JSON text, as Parquet gives either
    try:
        scores = reward(
            prompts=prompts,
            completions=completions,
            completion_ids=[[1]] * 4,
            trainer_state=object(),
            **columns,
        )
    finally:
        reward.close()
    assert scores == [1.0, 0.0, 1.0, 0.0]
    assert reward.__name__ == "mucode_verifier"


def test_missing_reference_column_names_the_setting(url: str) -> None:
    reward = VerifierReward(url)
    with pytest.raises(KeyError, match="answer_column"):
        reward(prompts=["p"], completions=["\\boxed{1}"], answer=["1"])
    reward.close()
    renamed = VerifierReward(url, answer_column="answer")
    assert renamed(prompts=["p"], completions=["\\boxed{1}"], answer=["1"]) == [1.0]
    renamed.close()


def test_unreachable_verifier_raises_instead_of_scoring_zero() -> None:
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    reward = VerifierReward(f"http://127.0.0.1:{port}", retries=0)
    with pytest.raises(VerifierUnavailableError):
        reward(prompts=["p"], completions=["\\boxed{1}"], solution=["1"])
    reward.close()


class _TrlLogs:
    """What TRL 1.16's GRPOTrainer hands reward functions: ``log_metric(name, value)`` appends to
    ``_pending_metrics[name]`` and ``log_extra(column, values)`` extends ``_pending_extra_logs[column]``."""

    def __init__(self) -> None:
        self.metrics: dict[str, list[float]] = {}
        self.extra: dict[str, list[object]] = {}

    def log_metric(self, name: str, value: float) -> None:
        self.metrics.setdefault(name, []).append(value)

    def log_extra(self, column: str, values: list[object]) -> None:
        self.extra.setdefault(column, []).extend(values)


def test_the_status_breakdown_reaches_trls_log_callbacks(url: str) -> None:
    from mucode.protocol import Status

    logs = _TrlLogs()
    reward = VerifierReward(url)
    try:
        scores = reward(
            prompts=["p"] * 3,
            completions=[GOOD, BAD, "no code"],
            completion_ids=[[1]] * 3,
            tests=[ADD] * 3,
            trainer_state=object(),
            log_metric=logs.log_metric,
            log_extra=logs.log_extra,
        )
    finally:
        reward.close()
    assert scores == [1.0, 0.0, 0.0]
    assert set(logs.metrics) == {f"mucode_verifier/status/{s.value}" for s in Status}
    assert logs.metrics["mucode_verifier/status/correct"] == [pytest.approx(1 / 3)]
    assert logs.metrics["mucode_verifier/status/no_code"] == [pytest.approx(1 / 3)]
    assert logs.metrics["mucode_verifier/status/sandbox_error"] == [0.0]
    assert logs.extra == {"mucode_verifier_status": ["correct", "wrong_answer", "no_code"]}


def test_none_filled_struct_fields_of_a_datasets_column_are_accepted(url: str) -> None:
    """🤗 datasets gives every row of a struct column the union of the keys, None where a row lacks one."""
    import datasets

    rows = [
        {"tests": {**ADD, "time_limit_s": 2.0}},
        {"tests": {"tests": {**ADD["tests"], "fn_name": None}, "checker": "code_contests"}},
    ]
    column = datasets.Dataset.from_list(rows)["tests"]
    assert column[0]["checker"] is None and column[1]["time_limit_s"] is None  # Arrow's fill
    reward = VerifierReward(url)
    try:
        assert reward(prompts=["p", "p"], completions=[GOOD, BAD], tests=list(column)) == [1.0, 0.0]
    finally:
        reward.close()
