"""A verl-compatible reward function backed by a mucode verifier.

Point verl at the file (``mucode verl-config`` writes these overrides)::

    reward.custom_reward_function.path=<site-packages>/mucode/integrations/verl/reward.py
    reward.custom_reward_function.name=compute_score   # or compute_score_batch with BatchRewardManager

and set ``MUCODE_VERIFIER_URL`` (comma-separated base URLs; ``MUCODE_VERIFIER_TOKEN`` if needed).
verl loads the file by path, so it imports nothing from ``mucode.integrations.verl.register`` (which
registers mucode's losses in verl): loading it costs the verifier client only.

A verl sample becomes a mucode item by the rules of ``mucode.verifier.samples.to_item`` (a
``{"program", "spec"}`` label or ``extra_info["mucode"]``, a code spec, verl's sandbox_fusion
``inputs``/``outputs``, else a math answer).

Deviation from verl's built-in scorers: an infrastructure failure (the verifier unreachable or a
sandbox error after the session's retries) raises ``VerifierUnavailableError`` instead of scoring 0,
because a 0 would be trained on as a wrong answer. Returns ``{"score", "acc", "status"}``.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from mucode.protocol import Connection, Result, Status
from mucode.verifier.samples import to_item
from mucode.verifier.session import VerifierSession, VerifierUnavailableError

__all__ = ["VerifierUnavailableError", "close", "compute_score", "compute_score_batch", "to_item"]

_sessions: dict[tuple[str, str | None], VerifierSession] = {}
_lock = threading.Lock()


def _session(extra_info: dict[str, Any] | None) -> VerifierSession:
    """One session per (URL, token) for the life of the process (verl calls from its reward workers)."""
    url = (extra_info or {}).get("verifier_url") or os.environ.get("MUCODE_VERIFIER_URL")
    if not url:
        raise VerifierUnavailableError(
            "no verifier URL: set MUCODE_VERIFIER_URL=http://host:port (start one with `mucode serve`)"
        )
    token = os.environ.get("MUCODE_VERIFIER_TOKEN")
    key = (str(url), token)
    with _lock:
        if key not in _sessions:
            _sessions[key] = VerifierSession(str(url), Connection(token=token), name="mucode-verl-reward")
        return _sessions[key]


def close() -> None:
    """Closes the sessions this process opened (verl never calls it: they live as long as its workers,
    and are closed at exit; for scripts and tests)."""
    with _lock:
        sessions = list(_sessions.values())
        _sessions.clear()
    for session in sessions:
        session.close()


def _verl_score(result: Result) -> dict[str, Any]:
    return {
        "score": float(result.reward),
        "acc": result.status is Status.correct,
        "status": result.status.value,
    }


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's per-sample reward function signature."""
    item = to_item(data_source, solution_str, ground_truth, extra_info)
    (result,) = _session(extra_info).verify([item], strict=True)
    return _verl_score(result)


def compute_score_batch(
    data_sources: list[str],
    solution_strs: list[str],
    ground_truths: list[Any],
    extra_infos: list[dict[str, Any] | None],
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's BatchRewardManager signature: one round trip per batch instead of per sample."""
    items = [
        to_item(d, s, g, e)
        for d, s, g, e in zip(data_sources, solution_strs, ground_truths, extra_infos, strict=True)
    ]
    if not items:
        return []
    return [_verl_score(r) for r in _session(extra_infos[0]).verify(items, strict=True)]
