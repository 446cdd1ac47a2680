"""A TRL reward function backed by a mucode verifier.

Hand it to TRL's ``GRPOTrainer`` like any reward function::

    from mucode.integrations.trl import VerifierReward
    trainer = GRPOTrainer(model=..., reward_funcs=[VerifierReward("http://127.0.0.1:8000")], ...)

TRL calls ``reward(prompts=..., completions=..., completion_ids=..., **columns)``, where ``columns``
holds every other column of the data set as one list per column (one value per completion), plus
``trainer_state`` in recent versions. A completion is a string (standard format) or a list of
messages (conversational format: the last message's ``content`` is scored).

How a row becomes a mucode item (first rule that applies; ``mucode.verifier.samples.to_item``, the
rules of the verl adapter and the OpenRLHF route):
1. a ``mucode`` column holding ``{"program": ..., "spec": {...}}``: used as is (plug-in programs);
2. the ``tests`` column (name configurable) holds a code spec (``{"tests": {...}}``, or verl's
   ``{"inputs", "outputs", "fn_name"?}``), as a dict or JSON text: a code item;
3. otherwise the ``solution`` column (TRL's name for the reference answer; configurable): a math item.

The verifier's verdicts reach TRL's logs through the two callbacks TRL (1.x, checked against 1.16's
``GRPOTrainer._calculate_rewards``) passes every reward function: ``log_metric(name, value)`` gets,
per batch, the fraction of completions with each status (``<name>/status/<status>``, every status
every call, so the keys agree across ranks), averaged by TRL over the logging step beside ``kl`` and
``entropy``; ``log_extra(column, values)`` gets each completion's status (column
``<name>_status``) for TRL's completions table. Older TRL versions pass neither; nothing is logged then.
A row read by 🤗 datasets from a struct column has ``None`` for keys it lacks; ``to_item`` drops them.

Deviation from TRL's own reward functions: an infrastructure failure (verifier unreachable, sandbox
error after the session's retries) raises ``VerifierUnavailableError``. TRL would read ``None`` as
"not applicable" and sum it to a reward of 0, which the policy would learn from as a wrong answer.
"""

from __future__ import annotations

from typing import Any

from mucode.protocol import Connection, Item, Result, Status
from mucode.verifier.samples import to_item
from mucode.verifier.session import VerifierSession, VerifierUnavailableError

__all__ = ["VerifierReward", "VerifierUnavailableError"]


class VerifierReward:
    """Scores TRL completions through a mucode verifier; returns one float reward per completion."""

    def __init__(
        self,
        url: str | list[str],
        *,
        token: str | None = None,
        answer_column: str = "solution",
        tests_column: str = "tests",
        name: str = "mucode_verifier",
        retries: int = Connection.retries,
    ) -> None:
        self.session = VerifierSession(
            url, Connection(token=token, retries=retries), name="mucode-trl-reward"
        )
        self.answer_column = answer_column
        self.tests_column = tests_column
        self.__name__ = name  # TRL names its reward metrics after the function's __name__

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        items = [self._item(i, completion, columns) for i, completion in enumerate(completions)]
        if not items:
            return []
        results = self.session.verify(items, strict=True)
        self._log(results, columns.get("log_metric"), columns.get("log_extra"))
        return [float(result.reward) for result in results]

    def _log(self, results: list[Result], log_metric: Any, log_extra: Any) -> None:
        """The status breakdown to TRL's ``log_metric`` / ``log_extra`` callbacks, when TRL passes them."""
        if callable(log_metric):
            for status in Status:
                share = sum(r.status is status for r in results) / len(results)
                log_metric(f"{self.__name__}/status/{status.value}", share)
        if callable(log_extra):
            log_extra(f"{self.__name__}_status", [r.status.value for r in results])

    def _item(self, i: int, completion: Any, columns: dict[str, Any]) -> Item:
        row = {
            name: values[i]
            for name, values in columns.items()
            if isinstance(values, list | tuple) and len(values) > i
        }
        truth = row.get("mucode") or row.get(self.tests_column)
        if truth is None:
            if self.answer_column not in row:
                raise KeyError(
                    f"row {i} has neither a {self.tests_column!r} nor a {self.answer_column!r} column (columns: "
                    f"{sorted(row)}); name the reference-answer column with VerifierReward(answer_column=...)"
                )
            truth = row[self.answer_column]
        return to_item("trl", _text(completion), truth, None)

    def close(self) -> None:
        """Closes the session (its connections and thread)."""
        self.session.close()


def _text(completion: Any) -> str:
    """The text of a standard (str) or conversational (list of messages) completion."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"a TRL completion is a string or a list of messages, got {type(completion).__name__}")
