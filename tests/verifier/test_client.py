"""The client and its session against a real service: batching, several URLs, and the one retry layer.

A crashing item (the service answers it with an infrastructure status every time, or the
connection fails) must be sent exactly 1 + N times for ``retries=N``; the counts come back in
``Scored.sends``, ``SendStats`` and the log. The sends are counted on the far side: by a reward
program served by the real service (``create_app`` on loopback), and by a loopback server that
counts the requests it refuses.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from mucode.protocol import Connection, Item, Result, Status
from mucode.rewards.registry import ProgramRegistry
from mucode.verifier.client import VerifierClient, VerifierRequestError
from mucode.verifier.core import Verifier
from mucode.verifier.session import VerifierSession, VerifierUnavailableError
from mucode.verifier.settings import VerifierSettings


def _dead_url() -> str:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _items(n: int) -> list[dict]:
    return [
        {"id": str(i), "program": "math", "response": f"\\boxed{{{i % 3}}}", "spec": {"answer": "1"}}
        for i in range(n)
    ]


class CountingProgram:
    """A reward program that counts how often each item reaches it; ``crash*`` ids always fail, with the
    status named in the spec (as a broken sandbox or a failing judge would), the others are correct."""

    name: ClassVar[str] = "counting"
    needs: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        self.calls: dict[str | None, int] = {}

    async def score(self, item: Item, ctx: object) -> Result:
        self.calls[item.id] = self.calls.get(item.id, 0) + 1
        if str(item.id).startswith("crash"):
            if item.spec.get("raise"):
                raise RuntimeError("the judge fell over")
            if "reward" in item.spec:  # an infrastructure status that claims a reward (a forgery)
                return Result(id=item.id, reward=item.spec["reward"], status=Status(item.spec["status"]))
            return Result.infra_failure(item.id, Status(item.spec["status"]), "the sandbox crashed")
        return Result(id=item.id, reward=1.0, status=Status.correct)


@pytest.fixture(scope="module")
def counting() -> Iterator[tuple[str, CountingProgram]]:
    import uvicorn

    from mucode.verifier.app import create_app

    program = CountingProgram()
    settings = VerifierSettings(
        backend="local", programs=["counting"], run_code=False, host="127.0.0.1", port=0
    )
    app = create_app(verifier=Verifier(settings, registry=ProgramRegistry({"counting": program})))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the counting verifier did not start"
        threading.Event().wait(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", program
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@pytest.mark.parametrize("retries", [0, 1, 3])
@pytest.mark.parametrize(
    "crash",
    [{"status": "sandbox_error"}, {"status": "verifier_error"}, {"raise": True}],
    ids=["sandbox_error", "verifier_error", "program_raises"],
)
def test_a_crashing_item_is_sent_exactly_one_plus_retries_times(
    counting: tuple[str, CountingProgram], retries: int, crash: dict, caplog: pytest.LogCaptureFixture
) -> None:
    url, program = counting
    tag = f"{retries}-{'-'.join(map(str, crash.values()))}"
    items = [
        Item(id=f"crash-{tag}", program="counting", response="x", spec=crash),
        Item(id=f"fine-{tag}", program="counting", response="x"),
    ]
    caplog.set_level(logging.INFO, logger="mucode.verifier.client")
    with VerifierSession(url, retries=retries, backoff_s=0.01) as session:
        scored = session.score(items)
        stats = session.stats
    assert program.calls[f"crash-{tag}"] == 1 + retries  # counted by the service's side
    assert program.calls[f"fine-{tag}"] == 1  # a correct item is never re-sent
    assert scored.sends == [1 + retries, 1] and scored.resends == retries
    assert (stats.items, stats.sends, stats.resends, stats.failed) == (2, 2 + retries, retries, 1)
    crashed, fine = scored.results
    assert crashed.infra and crashed.details["sends"] == 1 + retries and fine.status is Status.correct
    # charged to the program: its status kept, reward 0.0, marked and counted
    assert crashed.reward == 0.0 and crashed.details["charged"] is True and "charged" not in fine.details
    assert scored.charged == 1 and stats.charged == 1
    assert (
        f"after {1 + retries} sends (1 + {retries} re-sends, retries={retries}) and are charged"
        in caplog.text
    )


def test_an_infra_status_claiming_a_reward_is_charged_zero(counting: tuple[str, CountingProgram]) -> None:
    url, _ = counting
    forged = Item(
        id="crash-forged", program="counting", response="x", spec={"status": "sandbox_error", "reward": 1.0}
    )
    with VerifierSession(url, retries=1, backoff_s=0.01) as session:
        (result,) = session.verify([forged])
    assert (
        result.status is Status.sandbox_error and result.reward == 0.0 and result.details["charged"] is True
    )


@pytest.mark.parametrize("retries", [0, 2])
def test_a_failing_connection_is_sent_exactly_one_plus_retries_times(
    retries: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that answers 503 to everything: every request is one send of the item, counted there."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    requests: list[bytes] = []

    def refuse() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                length = int(
                    next(
                        line.split(b":")[1]
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    )
                )
                while len(rest) < length:
                    rest += conn.recv(65536)
                requests.append(rest)
                conn.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\nconnection: close\r\n\r\nbusy"
                )

    threading.Thread(target=refuse, daemon=True).start()
    caplog.set_level(logging.INFO, logger="mucode.verifier.client")
    try:
        with VerifierSession(
            f"http://127.0.0.1:{server.getsockname()[1]}", retries=retries, backoff_s=0.01
        ) as session:
            (result,) = session.verify(_items(1))
            stats = session.stats
    finally:
        server.close()
    assert len(requests) == 1 + retries
    assert all(b'"id":"0"' in body for body in requests)
    assert result.status is Status.verifier_error and "HTTP 503" in result.error
    assert result.details["sends"] == 1 + retries and stats.resends == retries
    assert f"after {1 + retries} sends (1 + {retries} re-sends, retries={retries})" in caplog.text


@pytest.mark.parametrize("retries", [0, 2])
def test_the_trainer_and_the_evaluators_send_a_crashing_item_1_plus_n_times_too(
    counting: tuple[str, CountingProgram], retries: int
) -> None:
    """The trainer's pipeline and the evaluators' judge add no retry loop of their own: the same
    1 + N sends reach the service, and the trainer's ``verifier/resends`` figure says N."""
    from mucode.eval.judge import Part, VerifierOptions, judge_parts
    from mucode.eval.store import RunStore
    from mucode.train.verify import VerifyPipeline

    url, program = counting
    crash = {
        "id": f"crash-train-{retries}",
        "program": "counting",
        "response": "x",
        "spec": {"status": "sandbox_error"},
    }
    fine = {"id": f"fine-train-{retries}", "program": "counting", "response": "x"}
    with VerifyPipeline([url], connection=Connection(retries=retries), backoff_s=0.01) as pipeline:
        pipeline.submit("group", [crash, fine])
        (group,) = list(pipeline.drain())
    assert program.calls[crash["id"]] == 1 + retries and program.calls[fine["id"]] == 1
    assert group.charged == [True, False] and group.masked == [False, False]  # charged: trained as a failure
    assert group.rewards == [0.0, 1.0] and group.statuses == ["sandbox_error", "correct"]
    assert pipeline.resends == retries and group.retries == retries and pipeline.infra_failures == 1

    parts = [
        Part(
            f"crash-eval-{retries}",
            0,
            "only",
            {"program": "counting", "response": "x", "spec": {"status": "verifier_error"}},
        ),
        Part(f"fine-eval-{retries}", 0, "only", {"program": "counting", "response": "y"}),
    ]
    verdicts = judge_parts(
        parts, RunStore(None, {}), VerifierOptions(urls=[url], connection=Connection(retries=retries))
    )
    sent = {
        item_id: n for item_id, n in program.calls.items() if str(item_id).endswith(f"-eval-{retries}#0#only")
    }
    assert sent == {f"crash-eval-{retries}#0#only": 1 + retries, f"fine-eval-{retries}#0#only": 1}
    assert verdicts[(f"crash-eval-{retries}", 0, "only")]["status"] == "verifier_error"
    assert (
        verdicts[(f"crash-eval-{retries}", 0, "only")]["reward"] == 0.0
    )  # charged: a failure, never left out


def test_no_resend_starts_after_the_retry_window(counting: tuple[str, CountingProgram]) -> None:
    url, program = counting
    with VerifierSession(url, retries=50, retry_window_s=0.0, backoff_s=0.01) as session:
        scored = session.score(
            [Item(id="crash-window", program="counting", response="x", spec={"status": "sandbox_error"})]
        )
    assert program.calls["crash-window"] == 1 and scored.sends == [1]


def test_strict_verify_raises_instead_of_returning_a_reward(counting: tuple[str, CountingProgram]) -> None:
    url, _ = counting
    with (
        VerifierSession(url, retries=0) as session,
        pytest.raises(VerifierUnavailableError, match="crash-strict"),
    ):
        session.verify(
            [Item(id="crash-strict", program="counting", response="x", spec={"status": "sandbox_error"})],
            strict=True,
        )


def test_batches_come_back_in_order(math_url: str) -> None:
    with VerifierSession(math_url, batch_size=3, max_concurrency=4) as session:
        results = session.verify(_items(20))
    assert [r.id for r in results] == [str(i) for i in range(20)]
    assert [r.status for r in results] == ["correct" if i % 3 == 1 else "wrong_answer" for i in range(20)]


def test_a_dead_url_is_retried_on_another(math_url: str) -> None:
    with VerifierSession([_dead_url(), math_url], batch_size=2, retries=3, backoff_s=0.01) as session:
        results = session.verify(_items(10))
    assert all(r.status in ("correct", "wrong_answer") for r in results)


def test_user_mistakes_raise_and_are_not_retried(math_url: str) -> None:
    bad = [{"program": "math", "response": "x", "spec": {}}]
    with VerifierSession(math_url, retries=5, backoff_s=5.0) as session:
        with pytest.raises(VerifierRequestError, match=r"items\[0\]\.spec\.answer: Field required") as err:
            session.verify(bad)
        assert err.value.status_code == 422
        assert session.stats.sends == 1, "a 4xx must not be retried"
        with pytest.raises(VerifierRequestError, match=r"items\[0\]\.response: Field required"):
            session.verify(
                [{"program": "math", "spec": {"answer": 1}}]
            )  # not an item: refused before sending
        assert session.stats.sends == 1


def test_async_use_and_blocking_inside_a_loop_is_refused(math_url: str) -> None:
    async def run() -> list[Result]:
        client = VerifierClient(math_url + "/")
        session = VerifierSession(math_url)
        try:
            with pytest.raises(RuntimeError, match="running event loop"):
                session.verify(_items(1))
            return await client.verify(_items(4))
        finally:
            await client.aclose()
            session.close()

    assert [r.id for r in asyncio.run(run())] == ["0", "1", "2", "3"]


def test_bad_constructor_arguments() -> None:
    with pytest.raises(ValueError, match="at least one base URL"):
        VerifierClient([])
    assert VerifierClient("127.0.0.1:1, http://h:2/").base_urls == ["http://127.0.0.1:1", "http://h:2"]


def test_items_with_infrastructure_status_are_resent_alone() -> None:
    import re

    import httpx

    from mucode.verifier.local import local_verifier

    # item_timeout_s far below the math limit: the slow item comes back verifier_error (infrastructure)
    # on every try. The tries share the first one's verification (each answer verified once), so a math
    # limit within reach of the third try (it was 1 s: 3 x 0.3 s plus back-off) let a loaded run see
    # that verification end as time_limit instead.
    with local_verifier(
        "local", programs=["math"], run_code=False, math_workers=2, math_timeout_s=20.0, item_timeout_s=0.3
    ) as url:
        with VerifierSession(url, retries=2, backoff_s=0.01) as session:
            items = [
                {
                    "id": "slow",
                    "program": "math",
                    "response": "\\boxed{9^{9^{9^{9^{9}}}}}",
                    "spec": {"answer": 1},
                },
                {"id": "fast", "program": "math", "response": "\\boxed{1}", "spec": {"answer": 1}},
            ]
            results = session.verify(items)
        metrics = httpx.get(f"{url}/metrics").text

    assert [r.status for r in results] == ["verifier_error", "correct"]
    assert "item_timeout_s" in results[0].error

    def count(status: str) -> float:
        m = re.search(rf'^verifier_items_total\{{program="math",status="{status}"\}} (\S+)$', metrics, re.M)
        return float(m.group(1)) if m else 0.0

    assert count("verifier_error") == 3  # the slow item: first try + 2 retries
    assert count("correct") == 1  # the fast item was not sent again


def test_the_old_retry_key_names_the_new_one() -> None:
    from mucode.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"verifier.max_retries was renamed verifier.retries"):
        load_config(None, ["verifier.max_retries=1"])
    assert load_config(None, ["verifier.retries=1"]).verifier.retries == 1


def test_a_dropped_session_closes_its_connections_and_thread(math_url: str) -> None:
    """TRL and verl never close their reward function's session: dropping it must not leak."""
    import gc
    import warnings

    session = VerifierSession(math_url, name="mucode-test-dropped")
    assert [r.status for r in session.verify(_items(2))] == ["wrong_answer", "correct"]
    assert any(t.name == "mucode-test-dropped" for t in threading.enumerate())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del session
        gc.collect()
    assert not any(t.name == "mucode-test-dropped" for t in threading.enumerate())
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)], [
        str(w.message) for w in caught
    ]


def test_clients_share_one_verifying_tls_context(math_url: str) -> None:
    """Loading the trust roots costs tens of milliseconds: built once per process, never per client,
    and still verifying (httpx's default) for https URLs."""
    import ssl

    async def contexts() -> list[ssl.SSLContext]:
        found = []
        for _ in range(2):
            client = VerifierClient(math_url)
            try:
                assert [r.status for r in await client.verify(_items(2))] == ["wrong_answer", "correct"]
                found.append(client._state().http._transport._pool._ssl_context)
            finally:
                await client.aclose()
        return found

    first, second = asyncio.run(contexts())
    assert first is second
    assert first.verify_mode is ssl.CERT_REQUIRED and first.check_hostname
