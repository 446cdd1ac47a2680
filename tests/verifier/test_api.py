"""The HTTP API without a sandbox: batches of math and plug-in items, health, metrics, OpenAPI."""

from __future__ import annotations

import re
import time

import httpx

MATH = [
    ("0.5", "Thus $\\boxed{\\frac12}$.", "correct"),
    ("27", "\\boxed{27.0}", "correct"),
    ("(1,2]", "\\boxed{(1, 2]}", "correct"),
    ("[1,2)", "\\boxed{(1,2]}", "wrong_answer"),
    ("4", "\\boxed{5}", "wrong_answer"),
    ("4", "no idea", "no_answer"),
]


def _math_items() -> list[dict]:
    return [
        {"id": f"m{i}", "program": "math", "response": r, "spec": {"answer": g}}
        for i, (g, r, _) in enumerate(MATH)
    ]


def test_math_batch(math_url: str) -> None:
    r = httpx.post(f"{math_url}/v1/verify", json={"items": _math_items()}, timeout=60)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["id"] for x in results] == [f"m{i}" for i in range(len(MATH))]
    assert [x["status"] for x in results] == [s for _, _, s in MATH]
    assert [x["reward"] for x in results] == [1.0 if s == "correct" else 0.0 for _, _, s in MATH]


def test_plugin_served_beside_builtins(math_url: str) -> None:
    items = [
        {
            "id": "p0",
            "program": "exact_match",
            "response": "thinking...\nAnswer: Paris",
            "spec": {"answer": "paris"},
        },
        {"id": "p1", "program": "exact_match", "response": "Answer: Lyon", "spec": {"answer": "Paris"}},
        *_math_items()[:1],
        {"id": "p2", "program": "exact_match", "response": "Paris", "spec": {"answer": "Paris"}},
    ]
    results = httpx.post(f"{math_url}/v1/verify", json={"items": items}, timeout=60).json()["results"]
    assert [x["status"] for x in results] == ["correct", "wrong_answer", "correct", "no_answer"]


def test_pathological_math_times_out_while_the_batch_is_verified(math_url: str) -> None:
    items = _math_items()
    items.insert(
        2, {"id": "slow", "program": "math", "response": "\\boxed{9^{9^{9^{9^{9}}}}}", "spec": {"answer": 1}}
    )
    results = httpx.post(f"{math_url}/v1/verify", json={"items": items}, timeout=60).json()["results"]
    assert results[2]["status"] == "time_limit" and results[2]["reward"] == 0.0
    rest = results[:2] + results[3:]
    assert [x["status"] for x in rest] == [s for _, _, s in MATH]


def test_health_readiness_and_metrics(math_url: str) -> None:
    assert httpx.get(f"{math_url}/healthz").json() == {"ok": True}
    ready = httpx.get(f"{math_url}/readyz")
    assert ready.status_code == 200 and ready.json()["math"]["workers"] == 2

    def correct_count() -> float:
        text = httpx.get(f"{math_url}/metrics").text
        m = re.search(r'^verifier_items_total\{program="math",status="correct"\} (\S+)$', text, re.M)
        return float(m.group(1)) if m else 0.0

    before = correct_count()
    httpx.post(f"{math_url}/v1/verify", json={"items": _math_items()}, timeout=60)
    assert correct_count() == before + 3
    text = httpx.get(f"{math_url}/metrics").text
    for name in (
        "verifier_item_seconds_bucket",
        "verifier_queue_depth",
        "verifier_items_in_flight",
        "verifier_math_workers",
        'verifier_requests_total{code="200",endpoint="/v1/verify"}',
    ):
        assert name in text


def test_openapi_documents_the_contract_with_examples(math_url: str) -> None:
    spec = httpx.get(f"{math_url}/openapi.json").json()
    assert {"/v1/verify", "/run_code", "/healthz", "/readyz", "/metrics"} <= set(spec["paths"])
    schemas = spec["components"]["schemas"]
    examples = schemas["VerifyRequest"]["examples"][0]["items"]
    assert {e["spec"].get("tests", {}).get("format") for e in examples} >= {"stdio", "call", "assert"}
    assert "422" in spec["paths"]["/v1/verify"]["post"]["responses"]


def test_a_failed_start_stops_what_started_and_says_why() -> None:
    import os

    import pytest

    from mucode.verifier.local import local_verifier
    from proctree import tree

    before = set(tree(os.getpid()))
    # The local sandbox starts (a jailed executor process), then the math workers cannot start
    # (1 MB of address space): the service must stop the sandbox again and report the failure.
    with (
        pytest.raises(RuntimeError, match="did not start"),
        local_verifier(
            "local",
            programs=["math", "code"],
            math_workers=1,
            math_memory_limit_mb=1,
            backend_options={"slots": 1, "uid_base": 62000},
            start_timeout_s=120,
        ),
    ):
        pass
    deadline = time.monotonic() + 10
    while set(tree(os.getpid())) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not set(tree(os.getpid())) - before, "processes left behind by a failed start"
