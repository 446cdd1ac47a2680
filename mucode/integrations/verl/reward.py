"""A verl-compatible reward function backed by a mucode verifier.

Point verl at it::

    custom_reward_function.path=<site-packages>/mucode/verifier/verl_reward.py
    custom_reward_function.name=compute_score          # or compute_score_batch with BatchRewardManager

and set ``MUCODE_VERIFIER_URL`` (comma-separated base URLs; ``MUCODE_VERIFIER_TOKEN`` if needed).

How a verl sample becomes a mucode item (first rule that applies):
1. ``extra_info["mucode"]`` or ``ground_truth`` is ``{"program": ..., "spec": {...}}`` (or its JSON
   text): used as is (plug-in programs too);
2. ``ground_truth`` is a dict (or JSON text of one) with ``tests``: a code item with that spec;
3. ``ground_truth`` has ``inputs``/``outputs`` (verl's sandbox_fusion format, optional ``fn_name``):
   a code item, stdio (or call when ``fn_name`` is set);
4. otherwise: a math item with ``answer = ground_truth``.

Deviation from verl's built-in scorers: an infrastructure failure (the verifier unreachable or a
sandbox error after the client's retries) raises ``VerifierUnavailableError`` instead of scoring 0,
because a 0 would be trained on as a wrong answer. Returns ``{"score", "acc", "status"}``.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from mucode.verifier.client import VerifierClient

__all__ = ["VerifierUnavailableError", "compute_score", "compute_score_batch", "to_item"]

_INFRA = ("verifier_error", "sandbox_error")
_clients: dict[tuple[str, str | None], VerifierClient] = {}
_lock = threading.Lock()


class VerifierUnavailableError(RuntimeError):
    """The verifier could not score a sample (infrastructure); not a wrong answer."""


def to_item(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None) -> dict[str, Any]:
    """The mucode item for one verl sample (rules in the module docstring)."""
    extra = extra_info or {}
    item_id = str(extra["index"]) if "index" in extra else None
    spec = extra.get("mucode")
    if isinstance(spec, str):  # JSON text, as `mucode verl-config --data-out` writes it to Parquet
        spec = json.loads(spec)
    if isinstance(spec, dict):
        return {"id": item_id, "program": spec["program"], "response": solution_str, "spec": spec.get("spec", {})}
    truth = ground_truth
    if isinstance(truth, str) and truth.lstrip().startswith("{"):
        try:
            truth = json.loads(truth)
        except json.JSONDecodeError:
            truth = ground_truth
    if isinstance(truth, dict) and "program" in truth:  # {"program", "spec"} as the label itself
        return {"id": item_id, "program": truth["program"], "response": solution_str, "spec": truth.get("spec", {})}
    if isinstance(truth, dict) and "tests" in truth:
        return {"id": item_id, "program": "code", "response": solution_str, "spec": truth}
    if isinstance(truth, dict) and "inputs" in truth and "outputs" in truth:
        fn_name = truth.get("fn_name")
        tests = {"format": "call" if fn_name else "stdio", "inputs": list(truth["inputs"]),
                 "outputs": list(truth["outputs"]), "fn_name": fn_name}
        return {"id": item_id, "program": "code", "response": solution_str, "spec": {"tests": tests}}
    return {"id": item_id, "program": "math", "response": solution_str, "spec": {"answer": truth}}


def _client(extra_info: dict[str, Any] | None) -> VerifierClient:
    url = (extra_info or {}).get("verifier_url") or os.environ.get("MUCODE_VERIFIER_URL")
    if not url:
        raise VerifierUnavailableError(
            "no verifier URL: set MUCODE_VERIFIER_URL=http://host:port (start one with `mucode serve`)")
    token = os.environ.get("MUCODE_VERIFIER_TOKEN")
    key = (str(url), token)
    with _lock:
        if key not in _clients:
            _clients[key] = VerifierClient(str(url), token=token)
        return _clients[key]


def _score(result: dict[str, Any]) -> dict[str, Any]:
    if result["status"] in _INFRA:
        raise VerifierUnavailableError(
            f"the verifier could not score a sample ({result['status']}): {result['details'].get('error')}")
    return {"score": float(result["reward"]), "acc": result["status"] == "correct", "status": result["status"]}


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None,
                  **kwargs: Any) -> dict[str, Any]:
    """verl's per-sample reward function signature."""
    item = to_item(data_source, solution_str, ground_truth, extra_info)
    (result,) = _client(extra_info).verify_sync([item])
    return _score(result)


def compute_score_batch(data_sources: list[str], solution_strs: list[str], ground_truths: list[Any],
                        extra_infos: list[dict[str, Any] | None], **kwargs: Any) -> list[dict[str, Any]]:
    """verl's BatchRewardManager signature: one HTTP round trip per batch instead of per sample."""
    items = [to_item(d, s, g, e) for d, s, g, e in zip(data_sources, solution_strs, ground_truths, extra_infos,
                                                       strict=True)]
    if not items:
        return []
    results = _client(extra_infos[0]).verify_sync(items)
    return [_score(r) for r in results]
