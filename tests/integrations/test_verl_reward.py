"""verl's reward-function signature on top of the client."""

from __future__ import annotations

import json

import pytest

from mucode.verifier.verl_reward import VerifierUnavailableError, compute_score, compute_score_batch, to_item


def test_samples_map_to_items() -> None:
    assert to_item("math500", "r", "\\frac12", None)["program"] == "math"
    code = to_item("cc", "r", json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]}), {"index": 7})
    assert code["id"] == "7" and code["spec"]["tests"]["format"] == "stdio"
    call = to_item("lcb", "r", {"inputs": ["1"], "outputs": ["1"], "fn_name": "f"}, None)
    assert call["spec"]["tests"] == {"format": "call", "inputs": ["1"], "outputs": ["1"], "fn_name": "f"}
    plugin = to_item("x", "r", "gt", {"mucode": {"program": "exact_match", "spec": {"answer": "a"}}})
    assert plugin["program"] == "exact_match" and plugin["spec"] == {"answer": "a"}


def test_compute_score_through_the_service(math_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUCODE_VERIFIER_URL", math_url)
    assert compute_score("math500", "so \\boxed{0.5}", "\\frac{1}{2}", {}) == {"score": 1.0, "acc": True,
                                                                                "status": "correct"}
    out = compute_score_batch(["a", "b"], ["\\boxed{3}", "Answer: x"], ["4", "x"],
                              [None, {"mucode": {"program": "exact_match", "spec": {"answer": "x"}}}])
    assert [o["status"] for o in out] == ["wrong_answer", "correct"]


def test_infrastructure_failure_raises_instead_of_scoring_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MUCODE_VERIFIER_URL", raising=False)
    with pytest.raises(VerifierUnavailableError, match="MUCODE_VERIFIER_URL"):
        compute_score("math500", "\\boxed{1}", "1", {})
