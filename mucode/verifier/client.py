"""``VerifierClient``: the async HTTP client trainers and evaluators use to get rewards.

- Splits the items into batches of ``batch_size`` and sends up to ``max_concurrency`` at once, over
  pooled connections, spreading batches over several base URLs (round robin).
- Retries with exponential backoff on *infrastructure* errors only: connection failures, timeouts,
  HTTP 408/429/5xx, and items that come back ``verifier_error``/``sandbox_error`` (only those items are
  re-sent). A 4xx is the caller's mistake: it raises ``VerifierRequestError`` with the server's message.
- When retries run out, the affected items come back with status ``verifier_error`` (or the last
  infrastructure status the server gave): never raised per item, never a reward of 0/1 to trust.
- Sends each distinct ``spec.tests`` object once per request (a shared test-set table keyed by
  content hash, ``mucode.verifier.wire``) and cuts batches by bytes as well as by count, below
  ``max_request_bytes`` (default: ``MUCODE_MAX_REQUEST_BYTES`` if set, else the service's default).
  An item too large for any request raises ``RequestTooLargeError`` before anything is sent.
  A 413 that names smaller caps than the client's (headers) makes it adopt them and cut again.
- Every send has an outer time limit (``timeout_s``), which the client tells the service
  (``X-Mucode-Timeout-S``) so that the service answers first, with ``verifier_error`` for the items it
  could not finish, instead of working on for a client that has already re-sent them. Bodies are streamed from the encoded items
  and test sets (no whole-body copies): the client holds one encoded copy of each distinct test set,
  plus one transient copy while it hashes one.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx

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
from mucode.verifier.wire import (
    CLIENT_TIMEOUT_HEADER,
    DEFAULT_MAX_REQUEST_BYTES,
    MAX_ITEMS_HEADER,
    MAX_REQUEST_BYTES_HEADER,
)

__all__ = ["RequestTooLargeError", "VerifierClient", "VerifierRequestError"]

logger = logging.getLogger(__name__)

_INFRA = frozenset({"verifier_error", "sandbox_error"})
_RETRY_CODES = frozenset({408, 429, 500, 502, 503, 504})
T = TypeVar("T")


class _Recut(Exception):
    """A 413 told smaller caps than this client's: the batch is cut again below them."""


def _default_max_request_bytes() -> int:
    raw = os.environ.get("MUCODE_MAX_REQUEST_BYTES", "").strip()
    try:
        return int(raw) if raw else DEFAULT_MAX_REQUEST_BYTES
    except ValueError:
        raise ValueError(f"MUCODE_MAX_REQUEST_BYTES={raw!r} is not an integer number of bytes") from None


class VerifierClient:
    def __init__(
        self,
        base_urls: str | list[str],
        *,
        token: str | None = None,
        timeout_s: float = 300,
        max_retries: int = 3,
        batch_size: int = 64,
        max_concurrency: int = 8,
        backoff_s: float = 0.5,
        max_backoff_s: float = 10.0,
        max_request_bytes: int | None = None,
    ) -> None:
        """``timeout_s`` bounds each send (connect to last byte); ``max_request_bytes`` caps each body
        (None: ``MUCODE_MAX_REQUEST_BYTES`` if set, else the service's default cap)."""
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        urls = [u.strip() for url in urls for u in url.split(",") if u.strip()]
        if not urls:
            raise ValueError("VerifierClient needs at least one base URL, e.g. 'http://127.0.0.1:8000'")
        self.base_urls = [(u if "://" in u else f"http://{u}").rstrip("/") for u in urls]
        if batch_size < 1 or max_concurrency < 1 or max_retries < 0:
            raise ValueError("batch_size and max_concurrency must be >= 1 and max_retries >= 0")
        self.max_request_bytes = max_request_bytes if max_request_bytes is not None else _default_max_request_bytes()
        if self.max_request_bytes < 1024 or timeout_s <= 0:
            raise ValueError("max_request_bytes must be >= 1024 and timeout_s > 0")
        self.token = token
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.batch_size = batch_size
        self.max_concurrency = max_concurrency
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._next_url = itertools.cycle(range(len(self.base_urls)))
        self._clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        self._sync_thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- public API ---------------------------------------------------------------------------
    async def verify(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Scores ``items`` (dicts); returns one result dict per item, in order."""
        results: list[dict[str, Any] | None] = [None] * len(items)
        exhausted: set[int] = set()  # items whose HTTP retries already ran out: not re-sent again
        pending = list(range(len(items)))
        if not items:
            return []
        prepared = await asyncio.to_thread(prepare, items)  # hashing megabytes of tests: off the loop
        cut(prepared, items, pending, batch_size=self.batch_size, max_bytes=self.max_request_bytes)  # fail early
        for attempt in range(self.max_retries + 1):
            await self._run_round(prepared, items, pending, results, exhausted)
            pending = [i for i in pending if i not in exhausted
                       and results[i] is not None and results[i]["status"] in _INFRA]  # type: ignore[index]
            if not pending or attempt == self.max_retries:
                break
            await asyncio.sleep(self._backoff(attempt))
        return [r if r is not None else _infra_result(items[i], "no result") for i, r in enumerate(results)]

    def verify_sync(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Blocking ``verify`` (runs on a private event loop thread; do not call from async code)."""
        return self._run_sync(self.verify(items))

    async def aclose(self) -> None:
        """Closes the connections of the current loop (and of the private loop of ``verify_sync``)."""
        loop = asyncio.get_running_loop()
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()
        self._stop_sync_loop()

    def close(self) -> None:
        """Blocking ``aclose`` for users of ``verify_sync``."""
        self._stop_sync_loop()

    # -- internals ----------------------------------------------------------------------------
    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            limits = httpx.Limits(max_connections=self.max_concurrency * 2,
                                  max_keepalive_connections=self.max_concurrency)
            client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s, connect=10.0), headers=headers,
                                       limits=limits)
            self._clients[loop] = client
        return client

    async def _run_round(self, prepared: Prepared, items: list[dict[str, Any]], indices: list[int],
                         results: list[dict[str, Any] | None], exhausted: set[int]) -> None:
        sem = asyncio.Semaphore(self.max_concurrency)

        async def one(batch: Batch) -> None:
            try:
                async with sem:
                    out, ok = await self._post_batch(prepared, batch, items)
            except _Recut:  # raises RequestTooLargeError if one item cannot fit the server's cap
                smaller = cut(prepared, items, batch.indices, batch_size=self.batch_size,
                              max_bytes=self.max_request_bytes)
                await asyncio.gather(*(one(b) for b in smaller))
                return
            for i, r in zip(batch.indices, out, strict=True):
                results[i] = r
            if not ok:
                exhausted.update(batch.indices)

        batches = cut(prepared, items, indices, batch_size=self.batch_size, max_bytes=self.max_request_bytes)
        await asyncio.gather(*(one(b) for b in batches))

    async def _send(self, url: str, prepared: Prepared, batch: Batch) -> httpx.Response:
        headers = {"Content-Type": "application/json", "Content-Length": str(body_length(prepared, batch)),
                   CLIENT_TIMEOUT_HEADER: f"{self.timeout_s:g}"}
        return await asyncio.wait_for(
            self._client().post(url, content=body(prepared, batch), headers=headers), self.timeout_s)

    async def _post_batch(self, prepared: Prepared, batch: Batch,
                          items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
        """One batch, retried on infrastructure errors; 4xx raises; exhaustion gives infra results.

        Returns the results and whether the server answered (False: retries ran out here)."""
        last_error = "not sent"
        n = len(batch.indices)
        for attempt in range(self.max_retries + 1):
            url = self.base_urls[next(self._next_url)] + "/v1/verify"
            wait = self._backoff(attempt)
            try:
                response = await self._send(url, prepared, batch)
            except TimeoutError:  # the outer limit of the whole send
                last_error = f"no answer within timeout_s={self.timeout_s} from {url}"
            except httpx.TransportError as exc:  # connect, read, write, protocol
                last_error = f"{type(exc).__name__} from {url}: {exc}"
            else:
                if response.status_code == 200:
                    results = _results(response)
                    if results is None:
                        last_error = f"{url} answered 200 without a valid results list: {response.text[:200]!r}"
                    elif len(results) != n:
                        last_error = f"{url} returned {len(results)} results for {n} items"
                    else:
                        return results, True
                elif response.status_code in _RETRY_CODES:
                    last_error = f"HTTP {response.status_code} from {url}: {response.text[:300]}"
                    wait = max(wait, min(self.max_backoff_s, _retry_after(response)))
                elif response.status_code == 413 and self._learn_caps(response, url, prepared, batch):
                    raise _Recut()
                else:
                    raise _request_error(response)
            if attempt < self.max_retries:
                await asyncio.sleep(wait)
        error = f"verifier unreachable after {self.max_retries + 1} attempts: {last_error}"
        return [_infra_result(items[i], error) for i in batch.indices], False

    def _learn_caps(self, response: httpx.Response, url: str, prepared: Prepared, batch: Batch) -> bool:
        """Adopts the caps a 413 tells when they are below this client's; True if ``batch`` (cut before
        that, perhaps by a concurrent batch's 413) is over them and must be cut again."""
        for header, attr in ((MAX_REQUEST_BYTES_HEADER, "max_request_bytes"), (MAX_ITEMS_HEADER, "batch_size")):
            try:
                cap = int(response.headers.get(header, "0"))
            except ValueError:
                continue
            if 0 < cap < getattr(self, attr):
                logger.warning("verifier %s takes at most %s=%d per request (this client had %d): cutting "
                               "batches below it; set VerifierClient(%s=...) to match", url, attr, cap,
                               getattr(self, attr), attr)
                setattr(self, attr, cap)
        return len(batch.indices) > self.batch_size or body_length(prepared, batch) > self.max_request_bytes

    def _backoff(self, attempt: int) -> float:
        return min(self.max_backoff_s, self.backoff_s * 2**attempt) * (0.5 + random.random() / 2)

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise RuntimeError("verify_sync() was called from a running event loop; use `await client.verify()`")
        with self._lock:
            if self._sync_loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="mucode-verifier-client", daemon=True)
                thread.start()
                self._sync_loop, self._sync_thread = loop, thread
        return asyncio.run_coroutine_threadsafe(coro, self._sync_loop).result()

    def _stop_sync_loop(self) -> None:
        with self._lock:
            loop, thread = self._sync_loop, self._sync_thread
            self._sync_loop = self._sync_thread = None
        if loop is None or thread is None:
            return
        client = self._clients.pop(loop, None)
        if client is not None:
            asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


def _infra_result(item: dict[str, Any], error: str) -> dict[str, Any]:
    return {"id": item.get("id"), "reward": 0.0, "status": "verifier_error", "details": {"error": error}}


def _results(response: httpx.Response) -> list[dict[str, Any]] | None:
    """The results of a 200 answer, or None when the body is not what the service sends (a proxy's page)."""
    try:
        results = response.json()["results"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(results, list) or not all(isinstance(r, dict) and "status" in r for r in results):
        return None
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
