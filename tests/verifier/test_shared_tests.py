"""Shared test sets and byte-cut batches, at real sizes, through real HTTP on loopback.

A LiveCodeBench problem can carry over 10 MB of tests; with 8 samples each carrying them, one request
would be ~100 MB, over the service's default 64 MiB cap. The client sends each test set once per
request and cuts batches by bytes; the service resolves the refs before validating.
"""

from __future__ import annotations

import json
import re
import socket
import tracemalloc
from collections.abc import Iterator

import httpx
import pytest

from mucode.verifier import wire
from mucode.verifier.batching import body_length, cut, prepare
from mucode.verifier.client import RequestTooLargeError
from mucode.verifier.local import local_verifier
from mucode.verifier.schemas import _SHARED_EXAMPLE, _SHARED_KEY, _SHARED_TESTS
from mucode.verifier.session import VerifierSession
from mucode.verifier.wire import DEFAULT_MAX_REQUEST_BYTES, canonical_json, digest_of

CORRECT = "```python\nimport sys\nprint(len(sys.stdin.read().strip()))\n```"
WRONG = "```python\nprint(0)\n```"


def _big_tests(total_bytes: int, n_tests: int, salt: str = "a") -> dict:
    """stdio tests whose inputs add up to ``total_bytes``: the answer of each is its input's length."""
    lengths = [total_bytes // n_tests + k for k in range(n_tests)]
    inputs = [(salt * n) + "\n" for n in lengths]
    return {"format": "stdio", "inputs": inputs, "outputs": [f"{n}\n" for n in lengths]}


def _code(id_: str, response: str, tests: dict) -> dict:
    return {"id": id_, "program": "code", "response": response, "spec": {"tests": tests, "time_limit_s": 10}}


def _requests(url: str, code: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    m = re.search(
        rf'^verifier_requests_total\{{code="{code}",endpoint="/v1/verify"\}} (\S+)$', text, re.M
    ) or re.search(rf'^verifier_requests_total\{{endpoint="/v1/verify",code="{code}"\}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def _gauge(url: str, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", httpx.get(f"{url}/metrics").text, re.M)
    return float(m.group(1)) if m else 0.0


@pytest.fixture(scope="module")
def code_url() -> Iterator[str]:
    """The code program on the local sandbox backend, with the service's default request cap."""
    with local_verifier(
        "local", programs=["code"], run_code=False, backend_options={"slots": 2, "uid_base": 63000}
    ) as url:
        yield url


def test_ten_megabytes_of_tests_times_eight_samples_in_one_request(code_url: str) -> None:
    tests = _big_tests(12 * 1024 * 1024, 12)
    items = [_code(f"s{k}", CORRECT if k in (2, 5) else WRONG, tests) for k in range(8)]
    assert len(canonical_json(tests)) > 10 * 1024 * 1024
    inlined = len(json.dumps({"items": items}))
    assert inlined > DEFAULT_MAX_REQUEST_BYTES, "the problem must be too large to send inlined"

    before = _requests(code_url, "200")
    client = VerifierSession(code_url, retries=0)
    try:
        results = client.verify(items)
    finally:
        client.close()

    assert [r.id for r in results] == [f"s{k}" for k in range(8)]
    assert [r.status for r in results] == ["correct" if k in (2, 5) else "wrong_answer" for k in range(8)]
    assert len(results[2].details["tests"]) == 12  # the correct samples really ran every test
    assert _requests(code_url, "200") - before == 1  # one request of ~12 MB carried all 8 samples
    assert _requests(code_url, "413") == 0


def test_problems_over_the_default_cap_together_split_by_bytes(code_url: str) -> None:
    """Six 12 MB problems (72 MB of distinct tests) in one call: over the default 64 MiB cap even with
    each test set sent once, so the client needs two requests; results come back in order."""
    problems = [_big_tests(12 * 1024 * 1024, 12, salt=c) for c in "abcdef"]
    items = [
        _code(f"p{p}s{s}", CORRECT if (p, s) == (3, 1) else WRONG, problems[p])
        for s in range(3)
        for p in range(6)
    ]
    before = _requests(code_url, "200")
    client = VerifierSession(code_url, retries=0)
    try:
        results = client.verify(items)
    finally:
        client.close()
    assert [r.id for r in results] == [it["id"] for it in items]
    assert [r.status for r in results] == [
        "correct" if (p, s) == (3, 1) else "wrong_answer" for s in range(3) for p in range(6)
    ]
    assert _requests(code_url, "200") - before == 2
    assert _requests(code_url, "413") == 0


def test_interleaved_problems_far_over_the_cap_split_in_order(code_url: str) -> None:
    problems = [_big_tests(1_000_000, 4, salt=c) for c in "abcd"]
    items = [
        _code(f"p{p}s{s}", CORRECT if (p + s) % 2 else WRONG, problems[p]) for s in range(3) for p in range(4)
    ]
    cap = 1_500_000  # one problem's tests fit in a request, two do not; all 12 items need >12 MB inlined
    before = _requests(code_url, "200")
    client = VerifierSession(code_url, max_request_bytes=cap, retries=0)
    try:
        results = client.verify(items)
    finally:
        client.close()
    assert [r.id for r in results] == [it["id"] for it in items]
    assert [r.status for r in results] == [
        "correct" if (p + s) % 2 else "wrong_answer" for s in range(3) for p in range(4)
    ]
    assert _requests(code_url, "200") - before == 4  # one request per problem: each test set sent once

    prepared = prepare(items)
    batches = cut(prepared, items, list(range(len(items))), batch_size=64, max_bytes=cap)
    assert all(body_length(prepared, b) <= cap for b in batches)
    assert sorted(i for b in batches for i in b.indices) == list(range(len(items)))


def test_math_batch_far_over_the_cap_is_cut_by_bytes(math_url: str) -> None:
    """The conftest service refuses bodies over 200 kB; 60 items of ~10 kB each are split to fit."""
    items = [
        {
            "id": str(i),
            "program": "math",
            "response": "x" * 10_000 + f"\\boxed{{{i % 3}}}",
            "spec": {"answer": "1"},
        }
        for i in range(60)
    ]
    before = _requests(math_url, "200")
    client = VerifierSession(math_url, max_request_bytes=200_000, retries=0)
    try:
        results = client.verify(items)
    finally:
        client.close()
    assert [r.id for r in results] == [str(i) for i in range(60)]
    assert [r.status for r in results] == ["correct" if i % 3 == 1 else "wrong_answer" for i in range(60)]
    assert _requests(math_url, "200") - before >= 4


def test_an_item_too_large_for_any_request_raises_before_sending() -> None:
    with socket.socket() as s:  # a port nobody listens on: sending anything would give verifier_error
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    client = VerifierSession(url, max_request_bytes=1_000_000, retries=0)
    items = [_code("ok", WRONG, _big_tests(10_000, 2)), _code("huge", WRONG, _big_tests(2_000_000, 2))]
    try:
        with pytest.raises(
            RequestTooLargeError,
            match=r"item 1 \(id 'huge'\).*over the request cap of 1000000 "
            r"bytes: raise MUCODE_MAX_REQUEST_BYTES.*max_request_bytes",
        ):
            client.verify(items)
    finally:
        client.close()


def test_equal_test_sets_are_hoisted_once_without_copies_per_sample() -> None:
    """Eight equal (not identical) 10 MB test sets: one encoded copy is kept, not eight."""
    size = 10 * 1024 * 1024
    items = [_code(str(k), WRONG, _big_tests(size, 10)) for k in range(8)]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        prepared = prepare(items)
        kept = tracemalloc.get_traced_memory()[0] - base
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert len(prepared.sets) == 1 and len(set(prepared.refs)) == 1
    assert kept < 1.5 * size, kept  # one encoded copy of the tests
    assert peak < 3.5 * size, peak  # plus one transient encoding while hashing the next sample


def test_the_result_store_and_the_client_encode_a_test_set_once() -> None:
    """The evaluator's store fingerprints a test set by its wire key and keeps that encoding; the
    client's next request sends that very encoding and takes it (nothing stays kept); what has no
    canonical JSON is still fingerprinted."""
    from mucode.eval.store import item_sha

    tests = _big_tests(2 * 1024 * 1024, 4)
    item_sha(_code("0", WRONG, tests))
    kept = wire._kept[id(tests)]
    assert kept[1] == digest_of(canonical_json(tests)) and kept[2] == canonical_json(tests)
    prepared = prepare([_code("1", WRONG, tests)])
    assert prepared.refs == [kept[1]] and prepared.sets[kept[1]] is kept[2]  # not encoded again
    assert id(tests) not in wire._kept
    item_sha(_code("2", WRONG, tests))  # the store remembers the digest: nothing encoded, nothing kept
    assert id(tests) not in wire._kept
    again = prepare([_code("3", WRONG, tests)])
    assert again.sets[kept[1]] == kept[2] and again.sets[kept[1]] is not kept[2]
    odd = {"format": "stdio", "inputs": ["1\n"], "outputs": [float("nan")]}
    assert item_sha(_code("4", WRONG, odd)) != item_sha(_code("4", WRONG, {**odd, "inputs": ["2\n"]}))


def test_the_openapi_example_and_its_key(code_url: str) -> None:
    assert digest_of(canonical_json(_SHARED_TESTS)) == _SHARED_KEY
    r = httpx.post(f"{code_url}/v1/verify", json=_SHARED_EXAMPLE, timeout=120)
    assert r.status_code == 200, r.text
    assert [x["status"] for x in r.json()["results"]] == ["correct", "wrong_answer"]
    schema = httpx.get(f"{code_url}/openapi.json").json()
    request_schema = schema["components"]["schemas"]["VerifyRequest"]
    assert "test_sets" in request_schema["properties"]
    assert _SHARED_EXAMPLE in request_schema["examples"]


@pytest.mark.parametrize(
    ("test_sets", "ref", "needle"),
    [
        ({}, "f" * 64, "items[0].spec.tests.ref: unknown test set"),
        (
            {"0" * 64: _SHARED_TESTS},
            "0" * 64,
            f"key is not the SHA-256 of the object's canonical JSON (that is {_SHARED_KEY})",
        ),
        ({_SHARED_KEY: _SHARED_TESTS}, 7, "unknown test set 7"),
    ],
)
def test_bad_refs_are_422_before_any_work(math_url: str, test_sets: dict, ref: object, needle: str) -> None:
    item = {"program": "math", "response": "\\boxed{1}", "spec": {"answer": 1, "tests": {"ref": ref}}}
    r = httpx.post(f"{math_url}/v1/verify", json={"test_sets": test_sets, "items": [item]}, timeout=60)
    assert r.status_code == 422, r.text
    assert needle in "\n".join(r.json()["problems"])


def test_the_client_learns_smaller_caps_from_a_413(math_url: str) -> None:
    """The conftest service takes 50 items and 200 kB per request; the client starts at 64 items and
    64 MiB, gets a 413 with the service's caps, and cuts below them: nothing fails, order kept."""
    items = [
        {
            "id": str(i),
            "program": "math",
            "response": "y" * 5_000 + f"\\boxed{{{i % 2}}}",
            "spec": {"answer": "1"},
        }
        for i in range(130)
    ]
    small = [{**item, "response": f"\\boxed{{{i % 2}}}"} for i, item in enumerate(items)]
    session = VerifierSession(math_url, retries=0)
    client = session.client
    assert (client.batch_size, client.max_request_bytes) == (64, DEFAULT_MAX_REQUEST_BYTES)
    try:
        results = session.verify(items)  # ~650 kB in batches of 64: over the bytes cap
        assert (client.batch_size, client.max_request_bytes) == (64, 200_000)
        results_small = session.verify(small)  # 64 small items: over the items cap
        assert (client.batch_size, client.max_request_bytes) == (50, 200_000)
    finally:
        session.close()
    for got in (results, results_small):
        assert [r.id for r in got] == [str(i) for i in range(130)]
        assert [r.status for r in got] == ["correct" if i % 2 else "wrong_answer" for i in range(130)]
    assert (
        session.stats.sends == 260
    )  # the sends refused with a 413 (cut again) are not counted as the items'


class _Spec:
    """What the service resolves refs on: an object with a ``spec`` dict (the service's ``Item``)."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec


def test_bodies_are_exactly_their_announced_length_and_resolve_to_the_items() -> None:
    """Content-Length is computed, not measured: every cut body must have exactly that many bytes, parse
    as a request, and resolve (as the service does) to the caller's items, each test set sent once."""
    import asyncio
    import random

    from mucode.verifier.batching import body
    from mucode.verifier.wire import _keys_as_sent, resolve_test_sets

    rng = random.Random(7)
    problems = [_big_tests(rng.randint(10, 5_000), rng.randint(1, 4), salt=c) for c in "pqrstu"]
    items = [
        _code(f"i{k}", "é" * rng.randint(0, 3000) if k % 3 else WRONG, problems[rng.randrange(6)])
        for k in range(60)
    ]
    items += [{"id": "m", "program": "math", "response": "\\boxed{1}", "spec": {"answer": 1}}]
    prepared = prepare(items)

    async def collect(batch) -> bytes:  # type: ignore[no-untyped-def]
        return b"".join([chunk async for chunk in body(prepared, batch)])

    for cap, size in ((30_000, 7), (60_000, 64), (10**7, 3)):
        batches = cut(prepared, items, list(range(len(items))), batch_size=size, max_bytes=cap)
        seen: list[int] = []
        for batch in batches:
            raw = asyncio.run(collect(batch))
            assert len(raw) == body_length(prepared, batch) <= cap
            request = json.loads(raw)
            assert len(request["items"]) == len(batch.indices) <= size
            assert len(request["test_sets"]) == len({prepared.refs[i] for i in batch.indices} - {None})
            specs = [_Spec(it["spec"]) for it in request["items"]]
            assert _keys_as_sent(request["test_sets"], raw) == set(request["test_sets"])  # no re-encoding
            assert resolve_test_sets(specs, request["test_sets"], raw) == []
            assert [w.spec for w in specs] == [items[i]["spec"] for i in batch.indices]
            seen += batch.indices
        assert sorted(seen) == list(range(len(items)))


def test_keys_are_checked_where_they_lie_and_any_other_body_by_encoding() -> None:
    """The service hashes each test set's bytes in the client's body; a body laid out otherwise is
    checked by canonical JSON as before, and a set changed after its key was taken is refused."""
    from mucode.verifier.wire import _keys_as_sent, resolve_test_sets

    sets = {digest_of(canonical_json(t)): t for t in (_big_tests(3000, 3, salt=c) for c in "xyz")}
    items = [{"spec": {"tests": {"ref": k}}} for k in sets]
    raw = (
        b'{"test_sets":{'
        + b",".join(b'"' + k.encode() + b'":' + canonical_json(t) for k, t in sets.items())
        + b'},"items":'
        + canonical_json(items)
        + b"}"
    )
    assert _keys_as_sent(json.loads(raw)["test_sets"], raw) == set(sets)
    spaced = json.dumps({"test_sets": sets, "items": items}).encode()  # canonical keys, other bytes
    assert _keys_as_sent(json.loads(spaced)["test_sets"], spaced) == set()
    specs = [_Spec(dict(it["spec"])) for it in items]
    assert resolve_test_sets(specs, json.loads(spaced)["test_sets"], spaced) == []
    assert [w.spec["tests"] for w in specs] == list(sets.values())
    first = next(iter(sets))
    tampered = raw.replace(b'"xxx', b'"xxy', 1)  # the first set's first input, changed after hashing
    table = json.loads(tampered)["test_sets"]
    assert table[first] != sets[first]
    assert _keys_as_sent(table, tampered) == set()  # the first failure ends the scan
    problems = resolve_test_sets([_Spec(dict(it["spec"])) for it in items], table, tampered)
    assert len(problems) == 1 and f"test_sets[{first!r}]: key is not the SHA-256" in problems[0]


def test_one_sample_alone_spreads_its_tests_over_the_idle_slot(code_url: str) -> None:
    tests = _big_tests(2 * 1024 * 1024, 6, salt="s")
    before = _gauge(code_url, "verifier_sandbox_spread_parts_total")
    client = VerifierSession(code_url, retries=0)
    try:
        (result,) = client.verify([_code("alone", CORRECT, tests)])
    finally:
        client.close()
    assert result.status == "correct" and len(result.details["tests"]) == 6, result
    assert _gauge(code_url, "verifier_sandbox_spread_parts_total") > before  # the second slot took a part
