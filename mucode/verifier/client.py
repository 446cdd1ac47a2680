"""``VerifierClient``: the async HTTP client of the verifier service; the one place that retries.

- Speaks the typed protocol (``mucode.protocol``): ``Item`` in (dicts are validated into
  items first), ``Result`` out, one per item, in order.
- Splits the items into batches of ``batch_size`` and sends at most ``max_concurrency`` requests at
  once *per client* (over every call), over pooled connections, spreading batches over several base
  URLs (round robin, so a re-send goes to the next URL).
- **One retry layer.** An item is sent again when its send failed for infrastructure reasons: a
  connection failure, a timeout, HTTP 408/429/5xx, an answer that is not the service's, or a result
  with an infrastructure status (``verifier_error``/``sandbox_error``; only those items are re-sent).
  Each item is sent at most ``1 + retries`` times, and no re-send starts later than
  ``retry_window_s`` after the call's first send (waiting for a send slot behind other calls does
  not count). The counts are kept honestly: ``Scored.sends`` (per item)
  and ``VerifierClient.stats`` count every send of every item; re-sends are logged.
- A 4xx is the caller's mistake: it raises ``VerifierRequestError`` with the server's message; it is
  never retried.
- When retries run out, the item is **charged** to the program: it comes back with its last
  infrastructure status (``verifier_error`` when the client made it up), ``reward = 0.0``,
  ``details["charged"] = True`` and ``details["sends"]``, and is counted (``SendStats.charged``,
  ``Scored.charged``). Never raised per item, and never left out: a policy that could make its
  samples fail the verifier would otherwise gain by it (an omitted sample scores better than a wrong
  one). Callers train and count it as a failure and watch the charged fraction.
- Sends each distinct ``spec.tests`` object once per request (a shared test-set table keyed by
  content hash, ``mucode.verifier.wire``) and cuts batches by bytes as well as by count, below
  ``max_request_bytes`` (default: ``MUCODE_MAX_REQUEST_BYTES`` if set, else the service's default).
  An item too large for any request raises ``RequestTooLargeError`` before anything is sent.
  A 413 that names smaller caps than the client's (headers) makes it adopt them and cut again (that
  refused send is not counted as one of the item's sends).
- Every send has an outer time limit (``timeout_s``), which the client tells the service
  (``X-Mucode-Timeout-S``) so that the service answers first, with ``verifier_error`` for the items it
  could not finish, instead of working on for a client that has already re-sent them. Bodies are
  streamed from the encoded items and test sets (no whole-body copies).

Synchronous callers use ``mucode.verifier.session.VerifierSession`` (this client on a background
event loop); this class is async only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import logging
import os
import random
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import ValidationError

from mucode.protocol import Connection, Item, Result, Status
from mucode.verifier.batching import (
    Batch,
    Prepared,
    RequestTooLargeError,
    VerifierRequestError,
    body,
    body_length,
    cut,
    prepare,
)
from mucode.verifier.schemas import VerifyResponse
from mucode.verifier.wire import (
    CLIENT_TIMEOUT_HEADER,
    DEFAULT_MAX_REQUEST_BYTES,
    MAX_ITEMS_HEADER,
    MAX_REQUEST_BYTES_HEADER,
)

__all__ = [
    "RequestTooLargeError",
    "Scored",
    "SendStats",
    "VerifierClient",
    "VerifierRequestError",
    "as_items",
    "charge",
]

logger = logging.getLogger(__name__)

_RETRY_CODES = frozenset({408, 429, 500, 502, 503, 504})


class _Recut(Exception):
    """A 413 told smaller caps than this client's: the batch is cut again below them."""


@dataclass
class SendStats:
    """Counts over the life of a client: items asked for, item sends (first sends and re-sends), and
    items that still had an infrastructure status after their last send."""

    items: int = 0
    sends: int = 0
    failed: int = 0
    """Items charged to the program (an infrastructure status after their last send)."""

    @property
    def charged(self) -> int:
        """The same count as ``failed``, under the contract's name."""
        return self.failed

    @property
    def resends(self) -> int:
        """Sends beyond the first of each item (what ``retries`` spent)."""
        return self.sends - self.items


@dataclass
class Scored:
    """The results of one call, in item order, and how many times each item was sent."""

    results: list[Result]
    sends: list[int]
    elapsed_s: float = 0.0

    @property
    def resends(self) -> int:
        return sum(self.sends) - len(self.sends)

    @property
    def failed(self) -> int:
        """Items left with an infrastructure status (charged to the program: reward 0.0)."""
        return sum(r.infra for r in self.results)

    @property
    def charged(self) -> int:
        """Items charged to the program (``details["charged"]``)."""
        return sum(bool(r.details.get("charged")) for r in self.results)


@dataclass
class _Call:
    """The state of one ``score`` call."""

    items: list[Item]
    wire: list[dict[str, Any]]
    prepared: Prepared
    results: list[Result | None]
    sends: list[int]
    retry_after_s: float = 0.0
    """The longest ``Retry-After`` the service asked for in the current round."""
    first_send: float | None = None
    """``time.monotonic()`` when the call's first request left (the retry window starts there)."""


@dataclass
class _LoopState:
    """What a client keeps per event loop: its connections and its send slots."""

    http: httpx.AsyncClient
    slots: asyncio.Semaphore


def as_items(items: Sequence[Item | Mapping[str, Any]]) -> list[Item]:
    """``items`` as ``Item`` objects; a dict that is not an item raises ``VerifierRequestError`` (422)."""
    out: list[Item] = []
    problems: list[str] = []
    for i, item in enumerate(items):
        if isinstance(item, Item):
            out.append(item)
            continue
        try:
            out.append(Item.model_validate(item))
        except ValidationError as exc:
            problems += [f"items[{i}].{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    if problems:
        raise VerifierRequestError(
            422, f"invalid items (checked before sending): {len(problems)} problems", problems
        )
    return out


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default verification (certifi's roots, ``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured), built
    once per process: loading the roots costs ~35 ms, which every new client (one per event loop, so
    one per evaluation or ``VerifierSession``) paid again before its first request."""
    return httpx.create_ssl_context(trust_env=True)


def _default_max_request_bytes() -> int:
    raw = os.environ.get("MUCODE_MAX_REQUEST_BYTES", "").strip()
    try:
        return int(raw) if raw else DEFAULT_MAX_REQUEST_BYTES
    except ValueError:
        raise ValueError(f"MUCODE_MAX_REQUEST_BYTES={raw!r} is not an integer number of bytes") from None


class VerifierClient:
    """Async client of one or more verifier replicas (see the module docstring)."""

    def __init__(
        self,
        base_urls: str | list[str],
        connection: Connection | None = None,
        *,
        backoff_s: float = 0.5,
        max_backoff_s: float = 10.0,
        max_request_bytes: int | None = None,
        **settings: Any,
    ) -> None:
        """``connection`` (:class:`mucode.protocol.Connection`, defaults there) with ``settings`` (its
        fields, e.g. ``retries=0``) replaced: ``timeout_s`` bounds each send (connect to last byte);
        ``retries`` is how many times an item is sent again after an infrastructure failure;
        ``retry_window_s`` bounds, from the call's first send, when a re-send may still start.
        ``max_request_bytes`` caps each body (None: ``MUCODE_MAX_REQUEST_BYTES`` if set, else the
        service's default cap)."""
        c = dataclasses.replace(connection or Connection(), **settings)
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        urls = [u.strip() for url in urls for u in url.split(",") if u.strip()]
        if not urls:
            raise ValueError("VerifierClient needs at least one base URL, e.g. 'http://127.0.0.1:8000'")
        self.base_urls = [(u if "://" in u else f"http://{u}").rstrip("/") for u in urls]
        self.max_request_bytes = (
            max_request_bytes if max_request_bytes is not None else _default_max_request_bytes()
        )
        if self.max_request_bytes < 1024:
            raise ValueError("max_request_bytes must be >= 1024")
        self.connection = c
        self.token = c.token
        self.timeout_s = c.timeout_s
        self.retries = c.retries
        self.retry_window_s = c.retry_window_s
        self.batch_size = c.batch_size
        self.max_concurrency = c.max_concurrency
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.stats = SendStats()
        self._next_url = itertools.cycle(range(len(self.base_urls)))
        self._loops: dict[asyncio.AbstractEventLoop, _LoopState] = {}

    # -- public API ---------------------------------------------------------------------------
    async def verify(self, items: Sequence[Item | Mapping[str, Any]]) -> list[Result]:
        """Scores ``items``; one result per item, in order (see ``score`` for the send counts)."""
        return (await self.score(items)).results

    async def score(self, items: Sequence[Item | Mapping[str, Any]]) -> Scored:
        """Scores ``items`` with the retry layer of the module docstring; results and send counts."""
        start = time.monotonic()
        typed = as_items(items)
        if not typed:
            return Scored([], [], 0.0)
        wire = [item.wire() for item in typed]
        prepared = await asyncio.to_thread(prepare, wire)  # hashing megabytes of tests: off the loop
        cut(
            prepared,
            wire,
            list(range(len(wire))),
            batch_size=self.batch_size,
            max_bytes=self.max_request_bytes,
        )  # refuses an item too large before anything is sent
        call = _Call(typed, wire, prepared, [None] * len(typed), [0] * len(typed))
        self.stats.items += len(typed)
        pending = list(range(len(typed)))
        for attempt in range(self.retries + 1):
            call.retry_after_s = 0.0
            await self._send_round(call, pending)
            pending = [i for i in pending if _result(call, i).infra]
            if not pending or attempt == self.retries:
                break
            delay = max(self._backoff(attempt), min(self.max_backoff_s, call.retry_after_s))
            if time.monotonic() - (call.first_send or start) + delay > self.retry_window_s:
                logger.warning(
                    "verifier: not re-sending %d items: the retry window of %g s (retry_window_s) is "
                    "over after %d sends",
                    len(pending),
                    self.retry_window_s,
                    attempt + 1,
                )
                break
            logger.info(
                "verifier: re-sending %d of %d items after an infrastructure failure (re-send %d of %d)",
                len(pending),
                len(typed),
                attempt + 1,
                self.retries,
            )
            await asyncio.sleep(delay)
        return self._finish(call, pending, time.monotonic() - start)

    async def aclose(self) -> None:
        """Closes the connections of the current event loop."""
        state = self._loops.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state.http.aclose()

    # -- internals ----------------------------------------------------------------------------
    def _finish(self, call: _Call, failed: list[int], elapsed_s: float) -> Scored:
        results = [_result(call, i) for i in range(len(call.items))]
        for i in failed:  # charged to the program: a failure, never left out (module docstring)
            results[i] = charge(results[i], call.sends[i])
        if failed:
            self.stats.failed += len(failed)
            first = results[failed[0]]
            logger.warning(
                "verifier: %d of %d items still had no verdict after %d sends (1 + %d re-sends, "
                "retries=%d) and are charged to the program as failures; e.g. %s: %s",
                len(failed),
                len(results),
                call.sends[failed[0]],
                call.sends[failed[0]] - 1,
                self.retries,
                first.status.value,
                first.error[:300],
            )
        return Scored(results, list(call.sends), elapsed_s)

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            limits = httpx.Limits(
                max_connections=self.max_concurrency * 2, max_keepalive_connections=self.max_concurrency
            )
            http = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s, connect=10.0),
                headers=headers,
                limits=limits,
                verify=_tls_context(),
            )
            state = self._loops[loop] = _LoopState(http, asyncio.Semaphore(self.max_concurrency))
        return state

    async def _send_round(self, call: _Call, indices: list[int]) -> None:
        batches = cut(
            call.prepared, call.wire, indices, batch_size=self.batch_size, max_bytes=self.max_request_bytes
        )
        await asyncio.gather(*(self._send_batch(call, batch) for batch in batches))

    async def _send_batch(self, call: _Call, batch: Batch) -> None:
        state = self._state()
        try:
            async with state.slots:
                self._count(call, batch, +1)  # counted when it leaves, so a send answered 4xx counts too
                if call.first_send is None:
                    call.first_send = time.monotonic()
                results = await self._post(state.http, call, batch)
        except _Recut:  # raises RequestTooLargeError if one item cannot fit the server's cap
            self._count(call, batch, -1)  # a send refused for its size only is not one of the item's sends
            smaller = cut(
                call.prepared,
                call.wire,
                batch.indices,
                batch_size=self.batch_size,
                max_bytes=self.max_request_bytes,
            )
            await asyncio.gather(*(self._send_batch(call, b) for b in smaller))
            return
        for i, result in zip(batch.indices, results, strict=True):
            call.results[i] = result

    def _count(self, call: _Call, batch: Batch, step: int) -> None:
        self.stats.sends += step * len(batch.indices)
        for i in batch.indices:
            call.sends[i] += step

    async def _post(self, http: httpx.AsyncClient, call: _Call, batch: Batch) -> list[Result]:
        """One send of one batch: its results, infrastructure results when the send failed, a raise on a 4xx."""
        url = self.base_urls[next(self._next_url)] + "/v1/verify"
        headers = {
            "Content-Type": "application/json",
            "Content-Length": str(body_length(call.prepared, batch)),
            CLIENT_TIMEOUT_HEADER: f"{self.timeout_s:g}",
        }
        try:
            response = await asyncio.wait_for(
                http.post(url, content=body(call.prepared, batch), headers=headers), self.timeout_s
            )
        except TimeoutError:  # the outer limit of the whole send
            return _failed(call, batch, f"no answer within timeout_s={self.timeout_s} from {url}")
        except httpx.TransportError as exc:  # connect, read, write, protocol
            return _failed(call, batch, f"{type(exc).__name__} from {url}: {exc}")
        if response.status_code == 200:
            results = _results(response, len(batch.indices))
            if isinstance(results, str):
                return _failed(call, batch, f"{url} {results}")
            return results
        if response.status_code in _RETRY_CODES:
            call.retry_after_s = max(call.retry_after_s, _retry_after(response))
            return _failed(call, batch, f"HTTP {response.status_code} from {url}: {response.text[:300]}")
        if response.status_code == 413 and self._learn_caps(response, url, call.prepared, batch):
            raise _Recut()
        raise _request_error(response)

    def _learn_caps(self, response: httpx.Response, url: str, prepared: Prepared, batch: Batch) -> bool:
        """Adopts the caps a 413 tells when they are below this client's; True if ``batch`` (cut before
        that, perhaps by a concurrent batch's 413) is over them and must be cut again."""
        for header, attr in (
            (MAX_REQUEST_BYTES_HEADER, "max_request_bytes"),
            (MAX_ITEMS_HEADER, "batch_size"),
        ):
            try:
                cap = int(response.headers.get(header, "0"))
            except ValueError:
                continue
            if 0 < cap < getattr(self, attr):
                logger.warning(
                    "verifier %s takes at most %s=%d per request (this client had %d): cutting "
                    "batches below it; set VerifierClient(%s=...) to match",
                    url,
                    attr,
                    cap,
                    getattr(self, attr),
                    attr,
                )
                setattr(self, attr, cap)
        return len(batch.indices) > self.batch_size or body_length(prepared, batch) > self.max_request_bytes

    def _backoff(self, attempt: int) -> float:
        return float(min(self.max_backoff_s, self.backoff_s * 2.0**attempt) * (0.5 + random.random() / 2))


def charge(result: Result, sends: int) -> Result:
    """``result`` (an infrastructure status) charged to the program: its status kept, reward 0.0,
    ``details["charged"] = True`` and how many times it was sent."""
    return result.model_copy(
        update={"reward": 0.0, "details": {**result.details, "charged": True, "sends": sends}}
    )


def _result(call: _Call, i: int) -> Result:
    result = call.results[i]
    if result is None:  # every index of a round gets a result; this is a bug guard, not a path
        return Result.infra_failure(call.items[i].id, Status.verifier_error, "no result")
    return result


def _failed(call: _Call, batch: Batch, error: str) -> list[Result]:
    """Infrastructure results for every item of a send that failed."""
    return [
        Result.infra_failure(call.items[i].id, Status.verifier_error, f"no answer from the verifier: {error}")
        for i in batch.indices
    ]


def _results(response: httpx.Response, n: int) -> list[Result] | str:
    """The results of a 200 answer, or what is wrong with it (e.g. a proxy's page instead of the service's)."""
    try:
        results = VerifyResponse.model_validate_json(response.content).results
    except (ValidationError, ValueError):
        return f"answered 200 without a valid results list: {response.text[:200]!r}"
    if len(results) != n:
        return f"returned {len(results)} results for {n} items"
    return results


def _retry_after(response: httpx.Response) -> float:
    """The server's ``Retry-After`` in seconds (0 when absent or not a number)."""
    try:
        return max(0.0, float(response.headers.get("retry-after", "0")))
    except ValueError:
        return 0.0


def _request_error(response: httpx.Response) -> VerifierRequestError:
    try:
        body = response.json()
        error, problems = str(body.get("error", body)), [str(p) for p in body.get("problems", [])]
    except ValueError:
        error, problems = response.text[:500], []
    return VerifierRequestError(response.status_code, error, problems)
