"""Service hygiene through real HTTP on loopback: bounded queues (429 + Retry-After), an outer limit on
every request and on every client send, and malformed text refused before any work."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from mucode.verifier.local import local_verifier
from mucode.verifier.session import VerifierSession
from mucode.verifier.settings import VerifierSettings

ADD = {"format": "stdio", "inputs": ["1 2\n"], "outputs": ["3\n"]}
SLOW = "```python\nimport time\ntime.sleep(8)\nprint(3)\n```"
SPIN = "```python\nwhile True:\n    pass\n```"
OK = "```python\nprint(sum(map(int, input().split())))\n```"


def _code(id_: str, response: str, **spec: object) -> dict:
    return {
        "id": id_,
        "program": "code",
        "response": response,
        "spec": {"tests": ADD, "time_limit_s": 20, **spec},
    }


def _metric(url: str, name: str, labels: str = "") -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    m = re.search(rf"^{name}{re.escape(labels)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def _wait_for(cond: Callable[[], bool], what: str, limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def _read_request(conn: socket.socket) -> None:
    """Reads one whole HTTP request (headers and Content-Length body): closing a socket with unread
    data would reset the connection instead of answering."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: *(\d+)", head, re.I).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += conn.recv(65536)


def _raw(url: str, path: str, obj: object) -> httpx.Response:
    """POST with ASCII JSON escapes, so lone surrogates travel as ``\\udXXX`` (valid JSON text)."""
    return httpx.post(
        f"{url}{path}",
        content=json.dumps(obj).encode(),
        timeout=60,
        headers={"content-type": "application/json"},
    )


@pytest.fixture(scope="module")
def small_url() -> Iterator[str]:
    """One scoring slot, one waiting place: the third concurrent piece of work is refused."""
    with local_verifier(
        "local",
        programs=["code"],
        run_code=True,
        max_concurrent_items=1,
        max_queued_items=1,
        max_items_per_request=1,
        retry_after_s=3,
        backend_options={"slots": 1, "uid_base": 63100},
    ) as url:
        yield url


@pytest.fixture(scope="module")
def hasty_url() -> Iterator[str]:
    """A 2 s outer limit per request."""
    with local_verifier(
        "local",
        programs=["code"],
        run_code=True,
        request_timeout_s=2.0,
        backend_options={"slots": 1, "uid_base": 63200},
    ) as url:
        yield url


def test_full_queue_is_429_with_retry_after(small_url: str) -> None:
    answers: dict[str, httpx.Response] = {}

    def send(name: str) -> threading.Thread:
        def run() -> None:
            answers[name] = httpx.post(
                f"{small_url}/v1/verify", json={"items": [_code(name, SLOW)]}, timeout=120
            )

        t = threading.Thread(target=run)
        t.start()
        return t

    first = send("first")
    _wait_for(lambda: _metric(small_url, "verifier_items_in_flight") == 1, "the first item to run")
    second = send("second")
    _wait_for(lambda: _metric(small_url, "verifier_queue_depth") == 1, "the second item to queue")

    refused = httpx.post(f"{small_url}/v1/verify", json={"items": [_code("third", OK)]}, timeout=60)
    run_code = httpx.post(f"{small_url}/run_code", json={"code": "print(1)"}, timeout=60)
    first.join(120)
    second.join(120)

    assert refused.status_code == 429, refused.text
    assert refused.headers["retry-after"] == "3"
    assert "MUCODE_MAX_QUEUED_ITEMS" in refused.json()["error"]
    assert run_code.status_code == 429 and run_code.headers["retry-after"] == "3"
    for name in ("first", "second"):
        assert answers[name].status_code == 200
        assert answers[name].json()["results"][0]["status"] == "correct"
    again = httpx.post(f"{small_url}/v1/verify", json={"items": [_code("again", OK)]}, timeout=60)
    assert again.json()["results"][0]["status"] == "correct"  # the room was given back


def test_a_queue_smaller_than_a_request_is_refused_at_startup() -> None:
    with pytest.raises(ValueError, match="MUCODE_MAX_QUEUED_ITEMS"):
        VerifierSettings(max_items_per_request=100, max_queued_items=10)


def test_a_request_past_its_outer_limit_is_an_infrastructure_status(hasty_url: str) -> None:
    r = httpx.post(f"{hasty_url}/v1/verify", json={"items": [_code("spin", SPIN)]}, timeout=120)
    assert r.status_code == 200, r.text
    (result,) = r.json()["results"]
    assert result["status"] == "verifier_error", result
    assert "MUCODE_REQUEST_TIMEOUT_S" in result["details"]["error"]


def test_run_code_past_its_outer_limit_is_504_with_retry_after(hasty_url: str) -> None:
    r = httpx.post(
        f"{hasty_url}/run_code", json={"code": "while True:\n    pass\n", "run_timeout": 30}, timeout=120
    )
    assert r.status_code == 504, r.text
    assert r.headers["retry-after"] == "2"
    assert "MUCODE_REQUEST_TIMEOUT_S" in r.json()["error"]


def test_the_service_answers_before_the_client_gives_up() -> None:
    """The client says how long it waits; the service (900 s limit) answers first, with verifier_error
    for the unfinished item, instead of working on for a client that has already re-sent it."""
    with local_verifier(
        "local", programs=["code"], run_code=False, backend_options={"slots": 1, "uid_base": 63400}
    ) as url:
        client = VerifierSession(url, timeout_s=10, retries=0)
        try:
            (result,) = client.verify([_code("spin", SPIN)])
        finally:
            client.close()
    assert result.status == "verifier_error"
    assert "not scored within the request limit of 8.0 s" in result.details["error"], result


def test_every_client_send_has_an_outer_limit() -> None:
    """A server that answers one byte at a time never trips a read timeout: the outer limit ends it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = server.accept()
        with conn:
            _read_request(conn)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n"
            )
            while not stop.wait(0.2):
                try:
                    conn.sendall(b" ")
                except OSError:
                    return

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    client = VerifierSession(f"http://127.0.0.1:{server.getsockname()[1]}", timeout_s=1.5, retries=0)
    try:
        (result,) = client.verify([{"id": "x", "program": "math", "response": "1", "spec": {"answer": 1}}])
    finally:
        client.close()
        stop.set()
        server.close()
    assert result.status == "verifier_error"
    assert "no answer within timeout_s=1.5" in result.details["error"]


def test_a_200_that_is_not_the_services_answer_is_an_infrastructure_error() -> None:
    """E.g. a proxy's HTML page: retried, then verifier_error, never a crash or a reward."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    page = b"<html>upstream is sleeping</html>"

    def answer() -> None:
        for _ in range(2):
            conn, _ = server.accept()
            with conn:
                _read_request(conn)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\nconnection: close\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(page), page)
                )

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    client = VerifierSession(f"http://127.0.0.1:{server.getsockname()[1]}", retries=1, backoff_s=0.01)
    try:
        (result,) = client.verify([{"id": "x", "program": "math", "response": "1", "spec": {"answer": 1}}])
    finally:
        client.close()
        server.close()
    assert result.status == "verifier_error"
    assert result.details["sends"] == 2  # 1 + retries=1
    assert "without a valid results list" in result.details["error"]


MALFORMED_ITEMS = [
    (
        {"id": "a\ud800", "program": "math", "response": "\\boxed{1}", "spec": {"answer": 1}},
        "items[0].id",
        "lone surrogate",
    ),
    (
        {"program": "math", "response": "\\boxed{1}\udc00", "spec": {"answer": 1}},
        "items[0].response",
        "lone surrogate",
    ),
    (
        {"program": "math", "response": "\\boxed{1}", "spec": {"answer": "1\ud83d"}},
        "items[0].spec.answer",
        "lone surrogate",
    ),
    (
        {"program": "math", "response": "1", "spec": {"answer": 1, "k\udc00": 1}},
        "items[0].spec.'k\\udc00'",
        "lone surrogate",
    ),
    (
        {"program": "math", "response": "1", "spec": {"answer": 1}, "meta\ud800": 1},
        "items[0]",
        "unicode string",
    ),
    (
        {"program": "math", "response": "1", "spec": {"answer": float("nan")}},
        "items[0].spec.answer",
        "nan is not a JSON number",
    ),
    (
        {"program": "math", "response": "1", "spec": {"answer": 1, "w": [float("-inf")]}},
        "items[0].spec.w[0]",
        "-inf is not a JSON number",
    ),
]


@pytest.mark.parametrize(("item", "where", "needle"), MALFORMED_ITEMS)
def test_malformed_values_are_422_before_any_work(math_url: str, item: dict, where: str, needle: str) -> None:
    before = _metric(math_url, "verifier_items_total", '{program="math",status="correct"}')
    r = _raw(math_url, "/v1/verify", {"items": [item]})
    assert r.status_code == 422, r.text
    assert any(p.startswith(where) and needle in p for p in r.json()["problems"]), r.text
    assert _metric(math_url, "verifier_items_total", '{program="math",status="correct"}') == before


def test_lone_surrogates_in_stdin_and_tests_are_422(small_url: str) -> None:
    tests = {"format": "stdio", "inputs": ["1 2\ud800\n"], "outputs": ["3\n"]}
    r = _raw(
        small_url, "/v1/verify", {"items": [{"program": "code", "response": OK, "spec": {"tests": tests}}]}
    )
    assert r.status_code == 422 and "items[0].spec.tests.inputs[0]: contains a lone surrogate" in r.text
    shared = {"format": "stdio", "inputs": ["1\n"], "outputs": ["\udbff"]}
    r = _raw(
        small_url,
        "/v1/verify",
        {
            "test_sets": {"k": shared},
            "items": [{"program": "code", "response": OK, "spec": {"tests": {"ref": "k"}}}],
        },
    )
    assert r.status_code == 422 and "test_sets.k.outputs[0]: contains a lone surrogate" in r.text
    r = _raw(small_url, "/run_code", {"code": "print(input())", "stdin": "x\udfff"})
    assert r.status_code == 422 and "stdin: contains a lone surrogate" in r.text
    r = _raw(small_url, "/run_code", {"code": "print('\ud800')"})
    assert r.status_code == 422 and "code: contains a lone surrogate" in r.text
    # a valid pair written as two escapes is fine
    r = _raw(small_url, "/run_code", {"code": "print(len(input()))", "stdin": "\U0001f600\n"})
    assert r.status_code == 200 and r.json()["run_result"]["stdout"] == "1\n"


def test_code_extraction_runs_off_the_event_loop(small_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """While one item's extraction is held (a probe around the real extractor), the service answers."""
    from mucode.rewards import extract

    started, release = threading.Event(), threading.Event()
    real = extract.EXTRACTORS.get("last_fence")

    def held(response: str, entry_point: str | None = None) -> str | None:
        started.set()
        release.wait(60)
        return real(response, entry_point)

    monkeypatch.setitem(extract.EXTRACTORS._items, "last_fence", held)  # noqa: SLF001 - a probe in the real slot
    answers: list[httpx.Response] = []
    adversarial = OK + "\n" + "prose after the code\n" * 50_000  # the program, then 1 MB of text
    worker = threading.Thread(
        target=lambda: answers.append(
            httpx.post(f"{small_url}/v1/verify", json={"items": [_code("held", adversarial)]}, timeout=120)
        )
    )
    worker.start()
    try:
        assert started.wait(60), "the item never reached extraction"
        assert httpx.get(f"{small_url}/healthz", timeout=30).json() == {"ok": True}
        assert httpx.get(f"{small_url}/readyz", timeout=30).status_code == 200
    finally:
        release.set()
        worker.join(120)
    assert answers[0].json()["results"][0]["status"] == "correct"
