"""MUCODE_TOKEN from clients that only take a URL: OpenRLHF (aiohttp) and verl's sandbox client (requests).

Real HTTP on loopback, a math-only verifier with a token. OpenRLHF's ``--remote_rm_url`` and verl's
``sandbox_fusion.url`` are plain URLs: the token rides in them, as credentials (sent as HTTP Basic)
or as ``?token=``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
import requests

from mucode.verifier.local import local_verifier

TOKEN = "s3cret-token"
BODY = {"query": ["Q: 1+1? A: \\boxed{2}"], "prompts": ["Q: 1+1? A: "], "labels": [2]}


@pytest.fixture(scope="module")
def port() -> Iterator[str]:
    with local_verifier("local", programs=["math"], run_code=False, math_workers=1, token=TOKEN) as base:
        yield base.rsplit(":", 1)[1]


def _aiohttp(url: str) -> tuple[int, Any]:
    async def post() -> tuple[int, Any]:  # OpenRLHF's call: session.post(url, json=data)
        async with aiohttp.ClientSession() as session, session.post(url, json=BODY) as r:
            return r.status, await r.json()

    return asyncio.run(post())


@pytest.mark.parametrize("userinfo", [f"mucode:{TOKEN}@", f"{TOKEN}@"], ids=["password", "user"])
def test_openrlhf_sends_the_token_as_url_credentials(port: str, userinfo: str) -> None:
    status, out = _aiohttp(f"http://{userinfo}127.0.0.1:{port}/openrlhf/reward")
    assert status == 200 and out["rewards"] == [1.0], out


def test_a_token_in_the_query_string_is_accepted(port: str) -> None:
    r = requests.post(f"http://127.0.0.1:{port}/openrlhf/reward?token={TOKEN}", json=BODY, timeout=60)
    assert r.status_code == 200 and r.json()["rewards"] == [1.0], r.text


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/openrlhf/reward",
        "http://mucode:wrong@127.0.0.1:{port}/openrlhf/reward",
        "http://127.0.0.1:{port}/openrlhf/reward?token=wrong",
    ],
    ids=["none", "wrong-credentials", "wrong-query"],
)
def test_a_missing_or_wrong_token_is_a_401_naming_the_ways(port: str, url: str) -> None:
    r = requests.post(url.format(port=port), json=BODY, timeout=60)
    assert r.status_code == 401 and "?token=<token>" in r.text, r.text


def test_the_bearer_header_still_works(port: str) -> None:
    r = requests.post(
        f"http://127.0.0.1:{port}/openrlhf/reward",
        json=BODY,
        timeout=60,
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert r.status_code == 200, r.text
