"""User mistakes are 4xx answers that say what is wrong, never a 500."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from mucode.verifier.app import create_app
from mucode.verifier.settings import VerifierSettings

GOOD = {"id": "a", "program": "math", "response": "\\boxed{1}", "spec": {"answer": "1"}}


def post(url: str, **kwargs) -> httpx.Response:
    return httpx.post(f"{url}/v1/verify", timeout=60, **kwargs)


@pytest.mark.parametrize(
    ("body", "code", "needle"),
    [
        (b'{"items": [', 400, "not valid JSON"),
        (b"[1, 2]", 422, "must be a JSON object"),
        (b'{"itemz": []}', 422, "items: Field required"),
        (
            json.dumps({"items": [{"program": "math", "spec": {"answer": 1}}]}).encode(),
            422,
            "items[0].response: Field required",
        ),
        (
            json.dumps({"items": [{**GOOD, "program": "chess"}]}).encode(),
            422,
            "unknown reward program 'chess'; valid names: exact_match, math",
        ),
        (
            json.dumps({"items": [GOOD, {**GOOD, "spec": {}}]}).encode(),
            422,
            "items[1].spec.answer: Field required",
        ),
        (json.dumps({"items": [{**GOOD, "spec": {"answer": True}}]}).encode(), 422, "boolean"),
        (
            json.dumps({"items": [{**GOOD, "program": "exact_match", "spec": {"answer": ""}}]}).encode(),
            422,
            "items[0].spec.answer: String should have at least 1 character",
        ),
    ],
)
def test_bad_requests(math_url: str, body: bytes, code: int, needle: str) -> None:
    r = post(math_url, content=body, headers={"content-type": "application/json"})
    assert r.status_code == code, r.text
    payload = r.json()
    assert needle in payload["error"] + "\n".join(payload["problems"])


def test_oversized_request_is_413(math_url: str) -> None:
    big = {**GOOD, "response": "x" * 300_000}
    r = post(math_url, json={"items": [big]})
    assert r.status_code == 413 and "MUCODE_MAX_REQUEST_BYTES" in r.json()["error"]

    def chunks():  # no Content-Length: the limit must hold for streamed bodies too
        yield b'{"items": [{"program": "math", "spec": {"answer": 1}, "response": "'
        for _ in range(30):
            yield b"y" * 10_000
        yield b'"}]}'

    r = post(math_url, content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_too_many_items_is_413(math_url: str) -> None:
    r = post(math_url, json={"items": [GOOD] * 51})
    assert r.status_code == 413 and "limit is 50" in r.json()["error"]


def test_the_service_still_works_after_bad_input(math_url: str) -> None:
    r = post(math_url, json={"items": [GOOD]})
    assert r.status_code == 200 and r.json()["results"][0]["status"] == "correct"


def test_bearer_token() -> None:
    settings = VerifierSettings(programs=["exact_match"], run_code=False, token="s3cret")  # type: ignore[arg-type]
    app = create_app(settings)
    item = {"program": "exact_match", "response": "Answer: 1", "spec": {"answer": "1"}}

    async def run() -> list[int]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
                codes = [
                    (await c.post("/v1/verify", json={"items": [item]})).status_code,
                    (
                        await c.post(
                            "/v1/verify", json={"items": [item]}, headers={"Authorization": "Bearer nope"}
                        )
                    ).status_code,
                    (await c.get("/metrics")).status_code,
                    (
                        await c.post(
                            "/v1/verify", json={"items": [item]}, headers={"Authorization": "Bearer s3cret"}
                        )
                    ).status_code,
                    (await c.get("/healthz")).status_code,
                ]
                r = await c.post("/v1/verify", json={"items": [item]})
                assert "Authorization: Bearer" in r.json()["error"]
                return codes

    assert asyncio.run(run()) == [401, 401, 401, 200, 200]


def test_default_bind_is_loopback() -> None:
    assert VerifierSettings().host == "127.0.0.1"
